"""The family matrix (issue 9): every text family transformers ships, built tiny from its config, through attnviz.

For each family: only attnviz's own errors escape load_model and trace; an all-stages family's weights equal
transformers' eager attention (encoder, decoder and cross for encoder-decoders) and its outputs are unchanged;
the outcome is the one recorded in `families.FAMILIES` (so a regression is caught), and a refusal says what the
model is, why it cannot be traced and what to use instead. docs/models.md is generated from the same table.

The default run takes a representative subset (every outcome, every kind of attention); the whole matrix runs with
ATTNVIZ_FAMILY_MATRIX=all (about 7 minutes on 2 cores).
"""

from __future__ import annotations

import json
import os

import pytest
import torch

import attnviz
from tests.hf import families as fm

ALL = os.environ.get("ATTNVIZ_FAMILY_MATRIX", "").strip().lower() == "all"

#: The default run: each outcome and each kind of attention at least once (no family is "not built" now).
REPRESENTATIVE = [
    "bert", "gpt2", "llama", "qwen2", "mistral", "gemma2", "gpt_oss", "granite_swa", "opt", "esm", "phi",
    "deepseek_v3", "jamba", "qwen3_5_text", "minimax", "t5", "bart", "marian", "mt5", "switch_transformers", "doge", "bloom", "mpt", "gpt_neo",
    "gptj", "xlm", "squeezebert", "mpnet", "deberta-v2", "falcon",  # all stages
    "xlnet",  # weights only
    "diffllama", "longformer", "rwkv", "mamba", "bigbird_pegasus", "fsmt",  # refused
    "blt", "funnel",  # refused: attention over byte patches; fails on the 2-token probe
    "gemma4_text", "zamba2", "glm5_next_text", "t5gemma", "xmod", "luke",  # per-layer sizes, hybrid, sparse, seq2seq...
]  # fmt: skip

PARAMS = sorted(fm.FAMILIES) if ALL else REPRESENTATIVE


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("families")


@pytest.mark.parametrize("model_type", PARAMS)
def test_family(model_type, root):
    expected, _why = fm.FAMILIES[model_type]
    result = fm.run_family(model_type, root)
    assert result.outcome != fm.ESCAPED, f"a non-attnviz error reached the user: {result.detail}"
    assert result.outcome != fm.WRONG, f"{model_type} differs from transformers' eager attention: {result.detail}"
    assert result.outcome == expected, f"{model_type}: {result.outcome} ({result.detail}), expected {expected}"
    if result.outcome == fm.REFUSED:
        message = result.detail
        assert model_type in message  # what: the model (its folder is named after the family)
        assert any(w in message for w in ("cannot", "does not", "no ", "calls attention twice"))  # why
        assert any(w in message for w in ("Use ", "Try ", "supported", "Add ")), message  # what to use instead


def test_the_table_lists_every_text_family_transformers_ships():
    assert set(fm.text_families()) == set(fm.FAMILIES)


def test_docs_models_md_is_generated_from_the_table():
    assert fm.DOC.read_text() == fm.render_doc(), "run: python -m tests.hf.families --write-doc"


def test_deepseek_head_dim_is_what_q_dot_k_sums_over(root):
    fm.run_family("deepseek_v3", root)
    loaded = attnviz.load_model(str(root / "deepseek_v3"), device="cpu")
    config = loaded.model.config
    assert loaded.d_head == config.qk_nope_head_dim + config.qk_rope_head_dim != config.v_head_dim


def test_hybrid_models_report_only_their_attention_layers(root):
    fm.run_family("jamba", root)
    loaded = attnviz.load_model(str(root / "jamba"), device="cpu")
    assert loaded.model.config.num_hidden_layers == 2 and loaded.n_layer == 1


def test_an_encoder_decoder_without_a_decoder_start_token_is_refused_at_load(root, tmp_path):
    fm.run_family("t5", root)
    folder = tmp_path / "t5-no-start"
    folder.mkdir()
    for f in (root / "t5").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    config.pop("decoder_start_token_id", None)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "generation_config.json").unlink(missing_ok=True)
    with pytest.raises(attnviz.ModelLoadError, match="decoder_start_token_id"):
        attnviz.load_model(str(folder), device="cpu")


def test_bloom_runs_with_eager_masks(root):
    """BLOOM refuses set_attn_implementation: its fallback must not keep the seam's boolean mask."""
    fm.run_family("bloom", root)
    loaded = attnviz.load_model(str(root / "bloom"), device="cpu")
    assert loaded.route == "readers"
    assert {m.config._attn_implementation for m in loaded.model.modules() if hasattr(m, "config")} == {"eager"}
    tr = attnviz.trace(loaded, fm.TEXT)
    ref = fm.eager_model(root / "bloom")
    with torch.no_grad():
        out = ref(input_ids=torch.tensor([tr.provenance.input_ids]), output_attentions=True)
    assert abs(tr.weights - fm.stack_attentions(out.attentions)).max() <= fm.ATOL


def test_sparse_attention_shows_only_the_keys_its_indexer_chose(root):
    """DeepSeek-V3.2 passes top-k key indices to the seam (index_topk=4 here): they become part of the mask."""
    fm.run_family("deepseek_v32", root)
    loaded = attnviz.load_model(str(root / "deepseek_v32"), device="cpu")
    tr = attnviz.trace(loaded, fm.TEXT)
    visible = tr.layer_mask(0).sum(-1)
    assert visible.max() <= 4 and visible[-1] == 4  # causal and top-4: the last query sees exactly 4 keys
    assert (tr.weights[0][..., ~tr.layer_mask(0)] == 0).all()


def test_select_keys_matches_transformers_eager_masking():
    from attnviz.hf.capture import _select_keys

    mask = torch.zeros(1, 1, 3, 3)
    indices = torch.tensor([[[0], [1], [0]]])
    out = _select_keys(mask, indices, 3)
    assert (out[0, 0] == 0).tolist() == [[True, False, False], [False, True, False], [True, False, False]]
    assert _select_keys(None, indices, 3)[0, 0].tolist() == (out[0, 0] == 0).tolist()
    assert _select_keys(mask, None, 3) is mask


def test_per_query_sinks_are_recorded_per_query(root):
    """Inkling 2 computes one sink logit per query and head from each token: every view of a layer keeps them."""
    fm.run_family("inkling2_text", root)
    loaded = attnviz.load_model(str(root / "inkling2_text"), device="cpu")
    tr = attnviz.trace(loaded, fm.TEXT)
    assert tuple(tr.layers[0].sinks.shape) == (tr.n_head, tr.n_tokens)
    with torch.no_grad():
        out = fm.eager_model(root / "inkling2_text")(input_ids=torch.tensor([tr.provenance.input_ids]),
                                                    output_attentions=True, use_cache=False)  # fmt: skip
    assert abs(tr.weights - fm.stack_attentions(out.attentions)).max() <= fm.ATOL
    assert (tr.weights.sum(-1) < 1 - 1e-6).all()  # the rest went to the sink
    layer = tr.layer(1)
    assert abs(tr.stages(1, heads=3, queries=(2, 5)).weights[0] - layer.weights[3, 2:5]).max() <= 1e-6
    assert abs(tr.stages(1, queries=(4, 9), keys=(0, 3)).weights - layer.weights[:, 4:9, :3]).max() <= 1e-6


def test_attention_over_units_other_than_the_tokens_is_refused_at_load(root):
    """BLT attends between bytes and the patches it groups them into: no layer-by-token map, so no trace."""
    fm.run_family("blt", root)
    with pytest.raises(attnviz.ModelLoadError, match="does not attend token to token: its attention "
                       "'local_encoder.cross_attn_layers.0' maps 6 queries to 2 keys for 2 tokens"):  # fmt: skip
        attnviz.load_model(str(root / "blt"), device="cpu")


def test_token_ids_passed_down_to_the_seam_do_not_stop_the_capture(root):
    """GLM-5-Next hands input_ids to every attention call; eager attention never reads them."""
    result = fm.run_family("glm5_next_text", root)
    loaded = attnviz.load_model(str(root / "glm5_next_text"), device="cpu")
    assert loaded.route == "seam" and result.outcome == fm.ALL, result.detail
