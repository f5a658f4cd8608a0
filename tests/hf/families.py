"""The family matrix: every text model type transformers ships, built tiny from its config, loaded and traced.

`text_families()` lists the model types of transformers' MODEL_MAPPING_NAMES whose base model reads token ids
and has no vision, audio or video part. `build(model_type, folder)` writes a tiny random model of that type
(hidden 32, 2 layers, 4 heads, a 20-word WordLevel tokenizer) with save_pretrained. `run_family` loads it with
attnviz, traces a sentence and compares every stage it can with transformers' own eager attention loaded
independently, and records the outcome: all stages / weights only / refused at load / build failed.

    python -m tests.hf.families                   # print the matrix (all families; a few minutes on 2 cores)
    python -m tests.hf.families --write-doc       # ... and rewrite docs/models.md
    python -m tests.hf.families llama bert        # only these families
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DOC = ROOT / "docs" / "models.md"
WORDS = "the cat sat on mat a dog ran away . hello world it was tired because".split()
SPECIALS = ["<pad>", "<unk>", "</s>", "<s>", "<mask>", "<sep>", "<cls>"]
TEXT = "the cat sat on the mat because it was tired ."
TARGET = "a dog ran away"
VOCAB = 99
ATOL = 1e-5
MAX_PARAMETERS = 2_000_000

#: Parts of a config that make a model multimodal (or not a text model at all).
NON_TEXT_PARTS = ("vision", "audio", "image", "video", "speech", "visual", "codec", "acoustic", "depth", "perceiver",
                  "vq", "semantic", "coarse", "fine", "spectrogram", "mel", "voice")  # fmt: skip

#: Model types whose base model reads token ids but that are not text models (speech, music, layout, tables...).
NOT_TEXT = {
    "bark": "audio generation (semantic, coarse and fine acoustic sub-models)",
    "clvp": "speech (text and speech encoders)",
    "csm": "speech generation",
    "dia": "speech generation",
    "fastspeech2_conformer": "text to speech (spectrogram decoder)",
    "fastspeech2_conformer_with_hifigan": "text to speech (vocoder)",
    "vits": "text to speech",
    "musicgen": "music generation (audio codec)",
    "musicgen_melody": "music generation (audio codec)",
    "moshi": "speech dialogue (audio codec)",
    "pocket_tts": "text to speech",
    "gradium_phonon_tts": "text to speech",
    "vibevoice": "speech",
    "higgs_audio_v2": "speech",
    "glm_image_vqmodel": "image tokenizer",
    "layoutlm": "documents: needs bounding boxes with every token",
    "layoutlmv2": "documents: needs the page image",
    "layoutlmv3": "documents: needs bounding boxes and the page image",
    "lilt": "documents: needs bounding boxes",
    "bros": "documents: needs bounding boxes",
    "markuplm": "web pages: needs xpath tags",
    "udop": "documents: needs the page image",
    "tapas": "tables: needs table structure ids",
    "lxmert": "vision and language: needs image features",
    "visual_bert": "vision and language: needs visual embeddings",
    "dpr": "a question/context encoder pair, not one model (its BERT encoder is covered by bert)",
    "vision-text-dual-encoder": "an image and a text encoder",
    "imagegpt": "images as pixel tokens",
    "flava": "vision and language",
    "xclip": "video and language",
    "clap": "audio and language",
    "owlv2": "open-vocabulary detection (vision)",
    "owlvit": "open-vocabulary detection (vision)",
    "groupvit": "vision and language",
    "bridgetower": "vision and language",
    "blip": "vision and language",
    "blip_2_qformer": "vision and language (query transformer over image features)",
    "align": "vision and language",
    "altclip": "vision and language",
    "chinese_clip": "vision and language",
    "clip": "vision and language (its text tower is covered by clip_text_model)",
    "clipseg": "vision and language",
    "siglip": "vision and language",
    "siglip2": "vision and language",
    "metaclip_2": "vision and language",
    "tvp": "video and language",
    "vilt": "vision and language",
    "git": "vision and language",
    "idefics": "vision and language",
    "kosmos-2.5": "documents (vision and language)",
    "chameleon": "vision and language (image tokens)",
    "emu3": "vision and language (image tokens)",
    "janus": "vision and language",
    "fuyu": "vision and language",
    "mllama": "vision and language",
    "seamless_m4t": "speech and text translation",
    "seamless_m4t_v2": "speech and text translation",
    "aimv2": "vision and language",
    "tipsv2": "vision and language",
    "evolla": "protein and language",
}


def text_families() -> list[str]:
    """Model types of transformers' base-model mapping that are text models (sorted)."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    out = []
    for model_type, names in MODEL_MAPPING_NAMES.items():
        name = names[0] if isinstance(names, (list, tuple)) else names
        try:
            cls = getattr(transformers, name)
            if cls.main_input_name != "input_ids" or model_type in NOT_TEXT:
                continue
            config_cls = CONFIG_MAPPING[model_type]
        except Exception:  # noqa: BLE001 - a class that cannot be imported is not a family we can build
            continue
        parts = [p.lower() for p in (getattr(config_cls, "sub_configs", None) or {})]
        if any(word in p for p in parts for word in NON_TEXT_PARTS):
            continue
        if any(word in model_type for word in ("vision", "vl", "ocr", "omni", "asr", "audio", "speech", "image")):
            continue
        out.append(model_type)
    return sorted(out)


# --- tiny configs ------------------------------------------------------------------------------------------

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN = 32, 2, 4, 2, 8, 64

#: Size attributes set when the default config has them (several spellings of the same thing).
SIZES = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "hidden_dim", "n_embed"), HIDDEN),
    **dict.fromkeys(
        (
            "num_hidden_layers",
            "n_layer",
            "num_layers",
            "n_layers",
            "encoder_layers",
            "decoder_layers",
            "num_decoder_layers",
        ),
        LAYERS,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "num_attention_heads",
            "n_head",
            "num_heads",
            "n_heads",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "num_decoder_attention_heads",
        ),
        HEADS,
    ),  # fmt: skip
    **dict.fromkeys(("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"), KV_HEADS),
    **dict.fromkeys(
        (
            "intermediate_size",
            "d_ff",
            "n_inner",
            "ffn_dim",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "ffn_hidden_size",
            "hidden_dim_ffn",
            "moe_intermediate_size",
            "shared_expert_intermediate_size",
            "expert_intermediate_size",
        ),
        FFN,
    ),  # fmt: skip
    **dict.fromkeys(("head_dim", "d_kv", "kv_channels", "attention_head_dim", "attention_head_size"), HEAD_DIM),
    **dict.fromkeys(
        ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "max_sequence_length", "seq_length"), 64
    ),  # fmt: skip
    **dict.fromkeys(("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_k", "top_k", "num_selected_experts"), 2),
    **dict.fromkeys(("n_shared_experts", "num_shared_experts"), 1),
    "vocab_size": VOCAB,
    "embedding_size": HIDDEN,
    "pad_token_id": 0,
    "eos_token_id": 2,
    "bos_token_id": 3,
    "decoder_start_token_id": 3,
    "sep_token_id": 5,
    "cls_token_id": 6,
    "mask_token_id": 4,
    "unk_token_id": 1,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 8,
    "v_head_dim": 8,
    "sliding_window": 4096,
    "rotary_dim": 4,
    "n_group": 1,
    "topk_group": 1,
    "index_topk": 4,  # sparse attention (DeepSeek-V3.2) then really hides keys in an 11-token text
    "index_head_dim": HEAD_DIM,
    "index_n_heads": 2,
    **dict.fromkeys(("mamba_n_heads", "n_mamba_heads"), HEADS),
    **dict.fromkeys(("mamba_d_head", "mamba_headdim"), 2 * HIDDEN // HEADS),  # mamba_expand (2) x hidden / heads
    "mamba_d_ssm": 2 * HIDDEN,  # Falcon-H1: the Mamba width (heads x head dim), expand x hidden by default
    **dict.fromkeys(("mamba_d_state", "state_size"), 16),
    "dim_head": HEAD_DIM,  # CPM-Ant
    "dim_ff": FFN,
    "entity_vocab_size": 16,  # LUKE
    "entity_emb_size": 16,
    **dict.fromkeys(("pronunciation_vocab_size", "shape_vocab_size"), 16),  # RoCBert
    **dict.fromkeys(("pronunciation_embed_dim", "shape_embed_dim"), 16),
    "vocab_size_per_layer_input": VOCAB,  # Gemma 3n / 4 per-layer embeddings
    "hidden_size_per_layer_input": 8,
    "encoder_hash_byte_group_vocab": 64,  # BLT
    "hidden_size_global": HIDDEN,
    "expert_ffn_hidden_size": FFN,
    "zero_expert_num": 2,
    "moe_topk": 2,
    "moe_hidden_size": HIDDEN,  # Muse Spark's experts' width
}

#: Family quirks: extra or replaced config values.
QUIRKS: dict[str, dict] = {
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]]),
    "jamba": dict(attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1),
    "deepseek_v3": dict(qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=8),
    "longformer": dict(attention_window=[4, 4]),
    "reformer": dict(
        attn_layers=["local", "lsh"],
        axial_pos_shape=[8, 8],
        axial_pos_embds_dim=[16, 16],
        local_attn_chunk_length=4,
        lsh_attn_chunk_length=4,
        num_buckets=2,
    ),  # fmt: skip
    "big_bird": dict(attention_type="original_full"),
    "bigbird_pegasus": dict(attention_type="original_full"),
    "funnel": dict(block_sizes=[1, 1], num_decoder_layers=1, d_head=8, d_inner=64),
    "xlnet": dict(d_head=8, d_inner=64),
    "transfo_xl": dict(d_head=8),
    "bamba": dict(attn_layer_indices=[1]),  # the default has none: every layer would be Mamba
    "granitemoehybrid": dict(layer_types=["linear_attention", "full_attention"]),  # the default: Mamba only
    "lfm2_moe": dict(layer_types=["conv", "full_attention"]),  # the default config leaves layer_types unset
    # the default config has no rope parameters for its (full attention) layer type; checkpoints do
    "cohere_compass_text": dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
    "esmc": dict(num_key_value_heads=HEADS),  # no grouped-query attention
    # index_topk a multiple of index_kpool and NoPE (its validator); its linear-attention layers' sizes
    "glm5_next_text": dict(index_kpool=2, qk_rope_head_dim=0, linear_head_dim=HEAD_DIM, linear_num_heads=HEADS),
    # DbrxAttention reads attn_config.rope_theta, which the default attention config does not have
    # and clamps q, k, v by clip_qkv, which it leaves None (DBRX checkpoints have 8)
    "dbrx": dict(attn_config=dict(kv_n_heads=KV_HEADS, rope_theta=10000.0, clip_qkv=8.0)),
    "mamba2": dict(head_dim=2 * HIDDEN // HEADS, n_groups=1),  # heads x head_dim = expand x hidden
    "neomme": dict(head_dim=16),  # full layers rotate a quarter of head_dim, in pairs of pairs
    "zaya": dict(num_experts_per_tok=1),  # the only value it supports
    "mistral4": dict(head_dim=16),  # qk_nope_head_dim + qk_rope_head_dim, as its config derives it (rope reads it)
    # two layers cannot share a cache; its per-layer lists follow num_hidden_layers
    "gemma3n_text": dict(
        num_kv_shared_layers=0, intermediate_size=[FFN] * LAYERS, activation_sparsity_pattern=[0.95, 0.0]
    ),  # fmt: skip
    # its shared transformer block is tied across hybrid layers: with one, the tie finds nothing and fails
    "zamba": dict(layers_block_type=["hybrid", "hybrid"]),
    "zamba2": dict(layers_block_type=["linear_attention", "hybrid"]),  # a Mamba layer, then one with attention
    # the default config leaves its query-sparse indexer unset, which the model needs
    "qwen4_exp_text": dict(
        indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=HEAD_DIM, indexer_budget=4, indexer_compress_ratio=2
    ),  # fmt: skip
}


def tiny_config(model_type: str):
    """A tiny config of `model_type`: the default config with the size attributes it has set small."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    cls = CONFIG_MAPPING[model_type]
    values = tiny_values(cls(), model_type)
    config = _construct(cls, values)
    names = MODEL_MAPPING_NAMES[model_type]
    if not config.architectures and isinstance(names, tuple):  # AutoModel picks by it where there are several
        config.architectures = [names[0]]  # (Funnel): name the first, as a checkpoint's config would
    if getattr(config, "is_encoder_decoder", False) and getattr(config, "decoder_start_token_id", None) is None:
        values["decoder_start_token_id"] = SIZES["decoder_start_token_id"]
    for k, v in values.items():  # some configs ignore a keyword or derive it: set what the model reads
        with contextlib.suppress(Exception):
            if getattr(config, k, None) != v and not isinstance(v, (list, dict)):
                setattr(config, k, v)
    return config


def tiny_values(default, model_type: str = "") -> dict:
    """The keyword arguments of a tiny config like `default`: sizes, layer patterns, per-layer and sub-configs."""
    from transformers import PreTrainedConfig

    cls = type(default)
    if default.is_heterogeneous:  # read the global values of per-layer attributes: each layer's are set below
        default.allow_global_per_layer_attribute_access = True
    settable = {k for k in SIZES if hasattr(default, k) and not isinstance(getattr(cls, k, None), property)}
    values = {k: v for k, v in SIZES.items() if k in settable}
    patterns, sources = layer_patterns(default)
    values.update(patterns)
    if default.is_heterogeneous:
        values["per_layer_config"] = per_layer_configs(default, sources)
    if "kv_lora_rank" in values and "num_key_value_heads" in values:  # latent attention expands k/v to every head
        values["num_key_value_heads"] = HEADS
    rope = rope_parameters(default, model_type)
    if rope:
        values["rope_parameters"] = rope
    for name in getattr(cls, "sub_configs", None) or {}:  # nested configs (encoder, decoder, attention...): shrunk too
        sub = getattr(default, name, None)
        if isinstance(sub, PreTrainedConfig):
            values[name] = dict(sub.to_dict(), **tiny_values(sub))
    values.update(QUIRKS.get(model_type, {}))
    return values


#: Attributes that give each layer's kind (attention, sliding, linear, mamba...), one entry a layer.
LAYER_PATTERNS = ("layer_types", "layers_block_type", "hybrid_override_pattern", "block_types")
#: Per-layer lists that follow the layers the tiny model keeps (mlp_layer_types: the first ones, dense then sparse).
LAYER_LISTS = ("indexer_types", "mlp_layer_types")


def layer_patterns(default) -> tuple[dict, list[int]]:
    """The default's layer patterns shrunk to LAYERS entries, and which default layer each tiny layer copies."""
    cls, values, sources = type(default), {}, list(range(LAYERS))
    for attr in LAYER_PATTERNS + LAYER_LISTS:
        seq = getattr(default, attr, None)
        if isinstance(getattr(cls, attr, None), property) or attr in (cls.attribute_map or {}):  # (an alias)
            continue
        if isinstance(seq, (list, tuple)) and len(seq) > LAYERS:
            if attr in LAYER_PATTERNS:
                sources = keep_attention(list(seq))
            values[attr] = [seq[i] for i in (sources if attr != "mlp_layer_types" else range(LAYERS))]
        elif isinstance(seq, str) and len(seq) > LAYERS:
            values[attr] = seq[:LAYERS] if "*" in seq[:LAYERS] else seq[0] + "*"
    return values, sources


def keep_attention(seq: list) -> list[int]:
    """Which LAYERS entries of a per-layer list to keep: the first ones, with an attention layer if the list has one."""
    head = list(range(LAYERS))
    attn = [i for i, x in enumerate(seq) if isinstance(x, str) and is_attention(x)]
    if attn and not any(i in attn for i in head):
        head[-1] = attn[0]
    return head


def is_attention(kind: str) -> bool:
    """Whether a layer kind is softmax attention over every earlier token (not linear, sliding or state-space)."""
    low = kind.lower()
    if any(w in low for w in ("linear", "sliding", "mamba")):
        return False
    return "attention" in low or kind in ("full", "attn", "*")


def per_layer_configs(default, sources: list[int]) -> dict:
    """The per-layer overrides of the default's layers that the tiny model keeps, their sizes scaled like the rest."""
    overrides = {int(k): v for k, v in (default.to_dict().get("per_layer_config") or {}).items()}
    out = {}
    for i, src in enumerate(sources):
        layer = {k: _scaled(default, k, v) for k, v in overrides.get(src, {}).items()}
        if layer:
            out[i] = layer
    return out


def _scaled(default, attr: str, value):
    """A per-layer size as the tiny global size times the layer's ratio to the default global (head_dim 512 vs 256)."""
    base = getattr(default, attr, None)
    if attr not in SIZES or not isinstance(value, int) or not isinstance(base, int) or not base:
        return value
    return max(1, round(SIZES[attr] * value / base))


def rope_parameters(default, model_type: str) -> dict:
    """The default's rope parameters with multimodal rope sections that fit the tiny head (sum: rotary dim / 2)."""
    rope = dict(getattr(default, "rope_parameters", None) or {})
    if model_type in MROPE_BUILT_IN:
        rope.setdefault("mrope_section", MROPE_BUILT_IN[model_type])
    sections = rope.get("mrope_section")
    if not sections:
        return {}
    total = int(HEAD_DIM * rope.get("partial_rotary_factor", 1.0)) // 2
    share = [s * total // sum(sections) for s in sections]
    for i in sorted(range(len(share)), key=lambda j: -sections[j])[: total - sum(share)]:
        share[i] += 1
    return dict(rope, mrope_section=share)


#: Families whose modeling code falls back to these rope sections when the config has none.
MROPE_BUILT_IN = {"glm4v_text": [8, 12, 12], "glm4v_moe_text": [8, 12, 12]}


def _construct(cls, values: dict):
    """cls(**values), leaving out values that only a read-only property would take."""
    aliases = getattr(cls, "attribute_map", {}) or {}
    for _ in range(5):
        try:
            return cls(**values)
        except AttributeError as e:
            bad = [k for k in values if f"'{k}'" in str(e) or f"'{aliases.get(k)}'" in str(e)]
            if "setter" not in str(e) or not bad:
                raise
            for k in bad:
                values.pop(k)
    return cls(**values)


def tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # Some families rebuild the tokenizer as their own byte-level BPE (Qwen2Tokenizer) with no merges: letters and
    # the byte-level space (Ġ) keep every word spellable there.
    letters = sorted(set("".join(WORDS)) - set(WORDS)) + ["\u0120"]
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS + letters)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>", pad_token="<pad>",
                                   bos_token="<s>", mask_token="<mask>", sep_token="<sep>", cls_token="<cls>")  # fmt: skip


def build(model_type: str, folder: Path) -> Path:
    """Write a tiny random `model_type` model and the WordLevel tokenizer to `folder`."""
    from attnviz.hf.load import model_class

    config = tiny_config(model_type)
    with torch.device("meta"):  # count first: a config the table does not shrink would build a real-sized model
        n = sum(p.numel() for p in model_class(config).from_config(config).parameters())
    if n > MAX_PARAMETERS:
        raise ValueError(f"the tiny config still has {n / 1e6:,.0f}M parameters (sizes the matrix does not shrink)")
    torch.manual_seed(0)
    model = model_class(config).from_config(config)
    with torch.no_grad():  # parameters that start at zero (sinks, some biases) get values that matter
        for name, p in model.named_parameters():
            if "sink" in name or "lambda" in name:
                p.normal_(0, 0.5)
    if hasattr(model, "set_default_language"):  # X-MOD: one adapter a language, none chosen by default
        model.set_default_language(config.languages[0])
    return save(model, folder)


def save(model, folder: Path) -> Path:
    """Write a tiny model and the matrix's tokenizer to `folder` as a checkpoint loads from it."""
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    # else AutoTokenizer picks the family's own tokenizer class (Qwen2Tokenizer...), which re-splits our words
    settings = Path(folder) / "tokenizer_config.json"
    settings.write_text(json.dumps(dict(json.loads(settings.read_text()), tokenizer_class="PreTrainedTokenizerFast")))
    return folder


def padded_trace(folder: Path, pad: int):
    """(the model in `folder` loaded through attnviz, its trace of TEXT with `pad` padding tokens, real tokens)."""
    import attnviz

    loaded = attnviz.load_model(str(folder), device="cpu")
    n_real = attnviz.trace(loaded, TEXT).n_tokens
    return loaded, attnviz.trace(loaded, TEXT, pad_to=n_real + pad), n_real


# --- running one family ----------------------------------------------------------------------------------

ALL, WEIGHTS, REFUSED, NOT_BUILT, ESCAPED, WRONG = (
    "all stages", "weights only", "refused", "not built", "error escaped", "wrong"
)  # fmt: skip


@dataclass
class Result:
    model_type: str
    outcome: str  # one of ALL, WEIGHTS, REFUSED, NOT_BUILT, ESCAPED, WRONG
    detail: str = ""  # the refusal message, the build error, what did not match
    labels: dict = field(default_factory=dict)  # n_layer, n_head, d_head as attnviz reports them
    seconds: float = 0.0

    def row(self) -> str:
        return f"{self.model_type:28s} {self.outcome:14s} {self.labels or ''} {self.detail[:160]}"


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"


def run_family(model_type: str, root: Path) -> Result:
    """Build, load with attnviz, trace and compare with eager. Never raises."""
    t0 = time.perf_counter()
    result = _run(model_type, Path(root))
    result.seconds = time.perf_counter() - t0
    return result


def _quiet():
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    return stack


def _run(model_type: str, root: Path) -> Result:
    import attnviz

    folder = root / model_type
    try:
        with _quiet():
            if not (folder / "config.json").exists():
                build(model_type, folder)
    except Exception as e:  # noqa: BLE001 - recorded as "not built" with its reason
        return Result(model_type, NOT_BUILT, _first_line(e))
    try:
        with _quiet():
            loaded = attnviz.load_model(str(folder), device="cpu")
    except attnviz.AttnvizError as e:
        broken = _eager_fails(folder)
        if broken:  # the tiny model itself is broken: the matrix's config, not a verdict on the family
            return Result(model_type, NOT_BUILT, f"the tiny model fails even with eager attention ({broken})")
        return Result(model_type, REFUSED, str(e))
    except Exception as e:  # noqa: BLE001 - the thing the matrix exists to catch
        return Result(model_type, ESCAPED, f"load_model: {_first_line(e)}")
    labels = dict(n_layer=loaded.n_layer, n_head=loaded.n_head, d_head=loaded.d_head)
    if loaded.is_seq2seq:
        labels = dict(labels, per_role=dict(loaded.layers_per_role))
    try:
        with _quiet():
            trace = attnviz.trace(loaded, TEXT, **({"target": TARGET} if loaded.is_seq2seq else {}))
    except attnviz.AttnvizError as e:
        return Result(model_type, WRONG, f"trace refused: {e}", labels)
    except Exception as e:  # noqa: BLE001
        return Result(model_type, ESCAPED, f"trace: {_first_line(e)}", labels)
    try:
        with _quiet():
            problems = compare_with_eager(loaded, trace, folder)
    except Exception as e:  # noqa: BLE001 - the eager reference itself failed
        problems = [f"eager reference failed: {_first_line(e)}"]
    outcome = ALL if loaded.route != "weights" else WEIGHTS
    if problems:
        return Result(model_type, WRONG, "; ".join(problems), labels)
    return Result(model_type, outcome, "", labels)


def _eager_fails(folder: Path) -> str:
    """Why a forward pass of the tiny model with transformers' eager attention fails, or "" when it runs."""
    from attnviz.hf.passes import call_kwargs  # no key/value cache, as attnviz runs the model

    try:
        with _quiet(), torch.no_grad():
            model = eager_model(folder)
            ids = torch.tensor([[3, 7, 8, 9, 10, 2]])
            extra = {"decoder_input_ids": ids[:, :2]} if getattr(model.config, "is_encoder_decoder", False) else {}
            model(input_ids=ids, **extra, **call_kwargs(model))
    except Exception as e:  # noqa: BLE001
        return _first_line(e)
    return ""


def eager_model(folder: Path, implementation: str = "eager"):
    from transformers import AutoConfig

    from attnviz.hf.load import model_class

    config = AutoConfig.from_pretrained(folder)
    model = model_class(config).from_pretrained(folder, attn_implementation=implementation, dtype=torch.float32)
    return model.eval()


def _main_output(out) -> torch.Tensor:
    for name in ("last_hidden_state", "logits", "encoder_last_hidden_state"):
        t = getattr(out, name, None)
        if isinstance(t, torch.Tensor):
            return t
    return out[0]


def stack_attentions(attentions) -> np.ndarray:
    """transformers' per-layer attentions (batch item 0) as one [layer, head, query, key] array."""
    return np.stack([a[0].float().numpy() for a in attentions if a is not None])


def eager_attentions(folder: Path, ids, n_real: int | None = None) -> np.ndarray:
    """Eager output_attentions [layer, head, query, key] for token `ids`; keys from n_real on are padding."""
    model = eager_model(folder)
    n_real = len(ids) if n_real is None else n_real
    mask = torch.tensor([[1] * n_real + [0] * (len(ids) - n_real)])
    from attnviz.hf.passes import call_kwargs  # no key/value cache, as attnviz runs the model

    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), attention_mask=mask, output_attentions=True, **call_kwargs(model))
    return stack_attentions(out.attentions)


#: Families whose output_attentions gives the masked scores (before the softmax), not the weights.
EAGER_GIVES_SCORES = {"squeezebert"}


def compare_with_eager(loaded, trace, folder: Path) -> list[str]:
    """What differs from transformers' eager attention: weights per part, labels, and the model's output."""
    from attnviz.hf import passes, recorder

    ref_model = eager_model(folder)
    problems = []
    if loaded.is_seq2seq:
        inputs = dict(input_ids=torch.tensor([trace.encoder.provenance.input_ids]),
                      decoder_input_ids=torch.tensor([trace.decoder.provenance.input_ids]))  # fmt: skip
        with torch.no_grad():
            ref = ref_model(**inputs, output_attentions=True, use_cache=False)
        parts = {"encoder": ref.encoder_attentions, "decoder": ref.decoder_attentions, "cross": ref.cross_attentions}
        for part, attentions in parts.items():
            problems += _weights_differ(trace.part(part), attentions, part)
    else:
        ids = torch.tensor([trace.provenance.input_ids])
        inputs = dict(input_ids=ids, attention_mask=torch.ones_like(ids))
        kw = {"use_cache": False} if "use_cache" in passes.call_kwargs(ref_model) else {}
        with torch.no_grad():
            ref = ref_model(**inputs, output_attentions=True, **kw)
        attentions = ref.attentions
        if loaded.model.config.model_type in EAGER_GIVES_SCORES:  # the weights are the softmax of what it returns
            attentions = [a.softmax(-1) for a in attentions]
        problems += _weights_differ(trace, attentions, "")
        if not problems and trace.n_layer and trace.has("vectors"):
            d = trace.layers[0].q.shape[-1]
            if loaded.d_head != d:
                problems.append(f"d_head {loaded.d_head} but q.k sums over {d}")
    ours = passes.forward(loaded.model, {k: v.to(loaded.device) for k, v in inputs.items()}, recorder.Recorder())
    diff = (_main_output(ours).float() - _main_output(ref).float()).abs().max().item()
    if not diff <= 1e-4:
        problems.append(f"model output differs from eager by {diff:.2e}")
    return problems


def _weights_differ(trace, attentions, part: str) -> list[str]:
    where = f"{part} " if part else ""
    n_q, n_k = trace.weights.shape[-2:]
    attentions = [a for a in (attentions or ()) if a is not None and a.dim() == 4 and tuple(a.shape[-2:]) == (n_q, n_k)]
    if not attentions:  # hybrids (MiniMax) also return their linear-attention layers' state: only softmax layers count
        return [f"{where}eager gives no attentions"]
    ref = stack_attentions(attentions)
    ours = trace.weights
    sinks = trace.facts(0).sinks is not None
    if sinks and np.allclose(ref.sum(-1), 1, atol=1e-4):  # eager returns the weights before the sink's share
        ours = ours / ours.sum(-1, keepdims=True)  # (GraniteSWA): the seam shows what really multiplies v
    if ours.shape != ref.shape:
        return [f"{where}weights shape {ours.shape}, eager {ref.shape}"]
    err = float(np.abs(ours - ref).max())
    return [] if err <= ATOL else [f"{where}weights differ from eager by {err:.2e}"]


# --- the matrix and its document -------------------------------------------------------------------------


def run_matrix(families, root: Path, log=None) -> list[Result]:
    results = []
    for model_type in families:
        r = run_family(model_type, root)
        if log:
            log(f"{r.seconds:5.1f}s {r.row()}")
        results.append(r)
    return results


#: What each family gives, and why: the expected outcome the test checks and the source of docs/models.md.
FAMILIES = {
    'afmoe': ('all stages', ''),
    'albert': ('all stages', 'one attention module shared by every layer: each application is a layer'),
    'apertus': ('all stages', ''),
    'arcee': ('all stages', ''),
    'aria_text': ('all stages', ''),
    'axk1': ('all stages', ''),
    'axk2': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask"),
    'bailing_hybrid': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'bamba': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'bart': ('all stages', ''),
    'beam': ('all stages', ''),
    'bert': ('all stages', ''),
    'bert-generation': ('all stages', ''),
    'big_bird': ('all stages', 'as megatron-bert, with attention_type="original_full" as the matrix builds it. transformers itself switches a block-sparse model to full attention, for good, on a text too short for its blocks: the probe at load is such a text, so attnviz then shows full attention even for a text long enough for blocks (a known limit)'),
    'bigbird_pegasus': ('refused', "is an encoder-decoder model whose encoder attention attnviz cannot capture (it is computed in the model's own code), so its three attentions cannot be shown together"),
    'biogpt': ('all stages', ''),
    'bitnet': ('all stages', ''),
    'blenderbot': ('all stages', ''),
    'blenderbot-small': ('all stages', ''),
    'bloom': ('all stages', "computes attention in its own code: attnviz reads q, k, scale, mask and the ALiBi bias from each attention module's inputs (checked against the model's own weights at load); the bias is slope x key position, as BLOOM adds it; causal, hide, scale and fill experiments are refused"),
    'blt': ('refused', "does not attend token to token: its attention 'local_encoder.cross_attn_layers.0' maps 6 queries to 2 keys for 2 tokens (it attends over units it builds from the tokens, such as patches of bytes), not a [head, query, key] map of the tokens"),
    'camembert': ('all stages', ''),
    'canine': ('refused', 'cannot be traced: it failed on a test sentence (The canine model failed on this text (RuntimeError: max_pool1d() Invalid computed output size: 0))'),
    'clip_text_model': ('all stages', ''),
    'codegen': ('all stages', 'as gptj (partial rotary); the mask is added before the 1/sqrt(d) scale, so the fill is dtype min / sqrt(d)'),
    'cohere': ('all stages', ''),
    'cohere2': ('all stages', ''),
    'cohere2_moe': ('all stages', ''),
    'cohere_compass_text': ('all stages', 'built with rope parameters for its full-attention layer type, which its default config leaves out (checkpoints have them)'),
    'convbert': ('all stages', 'as megatron-bert for its attention half: num_attention_heads / head_ratio heads (2 here), each half the usual width; the span-based convolution half of each layer mixes tokens through a per-token kernel, not a query-by-key map, and is not shown'),
    'cosmos3_edge_text': ('all stages', ''),
    'cpmant': ('weights only', 'computes attention in its own code (q.k plus a bucketed relative position bias and segment bias), not read yet; eager output_attentions gives the weights'),
    'ctrl': ('all stages', ''),
    'cwm': ('all stages', ''),
    'data2vec-text': ('all stages', ''),
    'dbrx': ('all stages', 'built with clip_qkv and rope_theta in its attention config, which the default leaves out (DBRX checkpoints have them)'),
    'deberta': ('all stages', 'as bloom: read from its own attention code; q (+ q_bias) is divided by sqrt(d_head x (1 + number of position terms)) before q.k (scale_on "q"); its disentangled content-to-position and position-to-content terms, computed by the module\'s own code from the scaled q, k and the relative embeddings, are the recorded bias (off in the default config; tests turn them on); talking-heads variants are refused (weights only, with a note)'),
    'deberta-v2': ('all stages', 'as bloom: read from its own attention code (DeBERTa-v2 and v3); k is divided by sqrt(d_head x (1 + number of position terms)) before q.k (scale_on "k"); its content-to-position and position-to-content terms over log-bucketed relative positions, computed by the module\'s own code, are the recorded bias (off in the default config, on in DeBERTa-v3); the enhanced mask decoder\'s separate query states are refused'),
    'deepseek_v2': ('all stages', ''),
    'deepseek_v3': ('all stages', "multi-head latent attention: d_head is what q.k sums over (qk_nope + qk_rope = 24 here), not v's dimension"),
    'deepseek_v32': ('all stages', 'sparse attention: the top-k key indices its indexer passes to the seam become part of the mask (index_topk=4 here, so keys really are hidden)'),
    'deepseek_v4': ('all stages', ''),
    'diffllama': ('refused', 'calls attention twice in each layer and subtracts the second map from the first (differential attention, as in DiffLlama): no single map per layer shows what it attends to, and attnviz would show two layers for one'),
    'distilbert': ('all stages', ''),
    'doge': ('all stages', "its dynamic mask adds a per-head bias to every key (from its value states) and, past keep_window_size keys, keeps only each head's top keys: the bias is recorded per head; a text on which heads hide different keys is refused with a message"),
    'dots1': ('all stages', ''),
    'dots3_note_text': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask; latent attention: d_head is qk_nope_head_dim + qk_rope_head_dim"),
    'electra': ('all stages', ''),
    'embedding_gemma2_text': ('all stages', "per-layer sizes: its full-attention layers have twice the sliding layers' head_dim and fewer key/value heads (set through its per-layer configs); d_head is the first layer's"),
    'ernie': ('all stages', ''),
    'ernie4_5': ('all stages', ''),
    'ernie4_5_moe': ('all stages', ''),
    'esm': ('all stages', 'q is multiplied by 1/sqrt(d_head) before rotary embedding and the model passes scale 1.0: attnviz divides it out again, so the scores are the raw q.k, the scale is 1/sqrt(d_head) and scale_on says "q"'),
    'esmc': ('all stages', ''),
    'eurobert': ('all stages', ''),
    'exaone4': ('all stages', ''),
    'exaone_moe': ('all stages', ''),
    'falcon': ('all stages', "as bloom: read from its own attention code; rotary (q.k / sqrt(d)) or ALiBi ((q.k + alibi) / sqrt(d) plus a mask that holds alibi / sqrt(d) again on visible cells: both are the recorded bias); k keeps its heads as the module has them: one (multi_query), num_kv_heads groups (new_decoder_architecture) or one per head"),
    'falcon_h1': ('all stages', ''),
    'falcon_mamba': ('refused', 'returned no attention weights at all: it has no softmax attention attnviz can read (state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM)'),
    'flaubert': ('all stages', 'as xlm'),
    'flex_olmo': ('all stages', ''),
    'flint': ('all stages', ''),
    'fnet': ('refused', 'returned no attention weights at all: it has no softmax attention attnviz can read (state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM)'),
    'fsmt': ('refused', 'is an encoder-decoder model whose attention attnviz cannot capture (it computes attention in its own code)'),
    'funnel': ('refused', "fails on attnviz's 2-token probe text ('hello world' under the matrix's tokenizer, which adds no [CLS] or [SEP]): Funnel's relative attention itself fails on 2 tokens (RuntimeError: output with shape [1, 4, 2, 1] doesn't match the broadcast shape [1, 4, 2, 2]), so it is refused at load"),
    'gemma': ('all stages', ''),
    'gemma2': ('all stages', 'logit softcapping is part of the scaled stage'),
    'gemma3_text': ('all stages', ''),
    'gemma3n_text': ('all stages', 'built without key/value sharing between layers (num_kv_shared_layers 0: two layers cannot share)'),
    'gemma4_text': ('all stages', "per-layer sizes: its full-attention layers have twice the sliding layers' head_dim (set through its per-layer configs); d_head is the first layer's"),
    'gemma4_unified_text': ('all stages', "per-layer sizes: its full-attention layers have twice the sliding layers' head_dim (set through its per-layer configs); d_head is the first layer's"),
    'glm': ('all stages', ''),
    'glm4': ('all stages', ''),
    'glm4_moe': ('all stages', ''),
    'glm4_moe_lite': ('all stages', ''),
    'glm4v_moe_text': ('all stages', 'its multimodal rope sections are scaled to the tiny head (text positions are the same on every axis)'),
    'glm4v_text': ('all stages', 'its multimodal rope sections are scaled to the tiny head (text positions are the same on every axis)'),
    'glm5_next_text': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask; hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced"),
    'glm_moe_dsa': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask"),
    'gpt-sw3': ('all stages', ''),
    'gpt2': ('all stages', ''),
    'gpt_bigcode': ('all stages', ''),
    'gpt_neo': ('all stages', "as bloom: read from its own attention code; no 1/sqrt(d) scale (1.0); local layers' sliding window is part of the mask; a padded query whose window sees only padding is refused (the model fills such a row two ways)"),
    'gpt_neox': ('all stages', ''),
    'gpt_neox_japanese': ('all stages', 'as bloom: read from its own attention code; causal, rotary (rotate-half) on the first rotary_ndims features of each head'),
    'gpt_oss': ('all stages', 'attention sinks join the softmax: rows sum to less than 1'),
    'gptj': ('all stages', 'as bloom: read from its own attention code; rotary embedding on the first rotary_dim features of each head only'),
    'granite': ('all stages', ''),
    'granite_docling_text': ('all stages', ''),
    'granite_swa': ('all stages', "its attention sinks scale the output after the softmax; eager returns the weights before the sinks' share, attnviz shows the weights that really multiply v (rows sum to less than 1), which the matrix checks against eager's renormalised"),
    'granitemoe': ('all stages', ''),
    'granitemoe_swa': ('all stages', 'as granite_swa: sinks; attnviz shows the weights that really multiply v'),
    'granitemoehybrid': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'granitemoeshared': ('all stages', ''),
    'gte': ('all stages', ''),
    'helium': ('all stages', ''),
    'hrm_text': ('all stages', 'its blocks are applied again in recurrent cycles: every application is an attention layer (16 for 2 blocks here), as eager reports'),
    'hunyuan_v1_dense': ('all stages', ''),
    'hunyuan_v1_moe': ('all stages', ''),
    'hy_v3': ('all stages', ''),
    'hy_v4': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask"),
    'hyperclovax': ('all stages', ''),
    'ibert': ('all stages', 'as megatron-bert on its float path (quant_mode off); with quant_mode on, its softmax is an integer approximation: weights only, with a note'),
    'inkling2_text': ('all stages', 'per-query sink logits (sinks=, computed from each token, one per query and head) join each row\'s softmax: a row\'s weights sum to less than 1, the rest went to the sink'),
    'inkling_text': ('all stages', ''),
    'internlm3': ('all stages', ''),
    'iquestcoder': ('all stages', ''),
    'jais2': ('all stages', ''),
    'jamba': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'jetmoe': ('all stages', ''),
    'jina_embeddings_v3': ('all stages', ''),
    'kimi_linear': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'kolibri1': ('all stages', ''),
    'laguna': ('all stages', ''),
    'led': ('refused', 'is an encoder-decoder model whose attention attnviz cannot capture (it computes attention in its own code)'),
    'lfm2': ('all stages', ''),
    'lfm2_moe': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'lfm3': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'llama': ('all stages', ''),
    'llama4_text': ('all stages', ''),
    'longcat_flash': ('all stages', 'two attention sub-layers in each block: every one is an attention layer (4 for 2 blocks here), as eager reports'),
    'longformer': ('refused', 'does not attend token to token: its attention weights come as (1, 4, 16, 5) for 16 tokens, not a [head, query, key] map (local windows, hashed buckets or an approximation of softmax)'),
    'longt5': ('refused', "is an encoder-decoder model whose encoder attention attnviz cannot capture (it is computed in the model's own code), so its three attentions cannot be shown together"),
    'luke': ('weights only', 'computes attention in its own code (word and entity queries, entity-aware when configured), not read yet; eager output_attentions gives the weights'),
    'm2m_100': ('all stages', ''),
    'mamba': ('refused', 'returned no attention weights at all: it has no softmax attention attnviz can read (state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM)'),
    'mamba2': ('refused', "returned no attention weights at all: it has no softmax attention attnviz can read (state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM)"),
    'marian': ('all stages', ''),
    'mbart': ('all stages', ''),
    'megatron-bert': ('all stages', "as bloom: read from its own attention code (BERT's code from before the attention interface: q.k / sqrt(d) + the additive mask)"),
    'mellum': ('all stages', ''),
    'mimo_v2_flash': ('all stages', ''),
    'minicpm3': ('all stages', ''),
    'minimax': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'minimax_m2': ('all stages', ''),
    'ministral': ('all stages', ''),
    'ministral3': ('all stages', ''),
    'mistral': ('all stages', ''),
    'mistral4': ('all stages', 'latent attention: d_head is qk_nope_head_dim + qk_rope_head_dim'),
    'mistral_large4_text': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask"),
    'mixtral': ('all stages', ''),
    'mobilebert': ('all stages', ''),
    'modernbert': ('all stages', "its local layers' sliding window (local_attention / 2 keys either side) is part of the mask the model builds; the flash-attention flag `deterministic` it passes changes nothing here"),
    'modernbert-decoder': ('all stages', ''),
    'molmo2_text': ('all stages', ''),
    'mpnet': ('all stages', 'as megatron-bert, plus its relative position bias (bucketed relative positions, one value per head, the same in every layer), recorded as the bias'),
    'mpt': ('all stages', "as bloom: read from its own attention code; the ALiBi bias is slope x (key position - last position), as MPT adds it"),
    'mra': ('refused', 'returned no attention weights at all: it has no softmax attention attnviz can read (state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM)'),
    'mt5': ('all stages', 'as t5: scale 1.0, relative position bias'),
    'muse_glimmer_text': ('all stages', ''),
    'muse_spark_text': ('all stages', ''),
    'mvp': ('refused', 'is an encoder-decoder model whose attention attnviz cannot capture (it computes attention in its own code)'),
    'nanochat': ('all stages', ''),
    'nemotron': ('all stages', ''),
    'nemotron_h': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'neomme': ('all stages', ''),
    'nllb-moe': ('all stages', ''),
    'nomic_bert': ('all stages', ''),
    'nystromformer': ('all stages', 'as megatron-bert, q and k each divided by d_head^1/4 (scale_on "q and k"), on its exact path (num_landmarks == segment_means_seq_len, as the default config); with fewer landmarks it approximates softmax (Nyström): weights only, with a note'),
    'olmo': ('all stages', ''),
    'olmo2': ('all stages', ''),
    'olmo3': ('all stages', ''),
    'olmo_hybrid': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'olmoe': ('all stages', ''),
    'openai-gpt': ('all stages', "as bloom: read from its own attention code; causally hidden cells are replaced by -10000 (the fill), padding keys get dtype min"),
    'openai_privacy_filter': ('all stages', 'q and k are each multiplied by d_head^-1/4 before the seam and the model passes scale 1.0: attnviz divides both out again, so the scores are the raw q.k, the scale is 1/sqrt(d_head) and scale_on says "q and k"'),
    'opt': ('all stages', 'q is multiplied by 1/sqrt(d_head) before the seam and the model passes scale 1.0: attnviz divides it out again, so the scores are the raw q.k, the scale is 1/sqrt(d_head) and scale_on says "q"'),
    'pegasus': ('all stages', ''),
    'pegasus_x': ('refused', "is an encoder-decoder model whose encoder attention attnviz cannot capture (it is computed in the model's own code), so its three attentions cannot be shown together"),
    'persimmon': ('all stages', ''),
    'phi': ('all stages', ''),
    'phi3': ('all stages', ''),
    'phimoe': ('all stages', ''),
    'plbart': ('all stages', ''),
    'prophetnet': ('refused', 'is an encoder-decoder model whose attention attnviz cannot capture (it computes attention in its own code)'),
    'qwen2': ('all stages', ''),
    'qwen2_moe': ('all stages', ''),
    'qwen3': ('all stages', ''),
    'qwen3_5_moe_text': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'qwen3_5_text': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'qwen3_moe': ('all stages', ''),
    'qwen3_next': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'qwen4_exp_text': ('all stages', "sparse attention (as deepseek_v32): the indexer's top-k keys become part of the mask; hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced"),
    'recurrent_gemma': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'reformer': ('refused', 'does not attend token to token: its attention weights come as (1, 4, 4, 4, 8) for 16 tokens, not a [head, query, key] map (local windows, hashed buckets or an approximation of softmax)'),
    'rembert': ('all stages', 'as megatron-bert'),
    'roberta': ('all stages', ''),
    'roberta-prelayernorm': ('all stages', ''),
    'roc_bert': ('all stages', ''),
    'roformer': ('all stages', 'as megatron-bert, with the rotary embedding (every second feature pair) on q and k'),
    'rwkv': ('refused', 'does not attend token to token: its attention weights come as (1, 16, 32) for 16 tokens, not a [head, query, key] map (local windows, hashed buckets or an approximation of softmax)'),
    'seed_oss': ('all stages', ''),
    'smollm3': ('all stages', ''),
    'solar_open': ('all stages', ''),
    'splinter': ('all stages', ''),
    'squeezebert': ('all stages', "as megatron-bert, q and k from grouped 1x1 convolutions; its output_attentions gives the masked scores, not the weights: attnviz checks that stage at load and shows their softmax as the weights (the matrix compares with the softmax of eager's)"),
    'stablelm': ('all stages', ''),
    'starcoder2': ('all stages', ''),
    'switch_transformers': ('all stages', 'as t5: no 1/sqrt(d) scale (1.0), the relative position bias joins the scaled stage; its mixture-of-experts routing only steers the feed-forward layers'),
    't5': ('all stages', 'no 1/sqrt(d) scale (1.0); the relative position bias joins the scaled stage'),
    't5gemma': ('all stages', ''),
    't5gemma2': ('refused', "is an encoder-decoder model whose cross attention attnviz cannot capture (it is computed in the model's own code), so its three attentions cannot be shown together"),
    'tipsv2_text_model': ('all stages', ''),
    'ultrabert': ('all stages', ''),
    'umt5': ('all stages', 'as t5: scale 1.0, relative position bias'),
    'vaultgemma': ('all stages', ''),
    'xglm': ('all stages', 'as bloom: read from its own attention code; q is multiplied by 1/sqrt(d_head) before q.k: the scores are the raw q.k and scale_on says "q"'),
    'xlm': ('all stages', 'as bloom: read from its own attention code; q is divided by sqrt(d_head) before q.k (scale_on "q")'),
    'xlm-roberta': ('all stages', ''),
    'xlm-roberta-xl': ('all stages', ''),
    'xlnet': ('weights only', 'computes attention in its own code: two-stream relative attention (content, position and segment terms added to q.k), not a single q.k map attnviz can read; eager output_attentions gives the weights'),
    'xlstm': ('refused', "returned no attention weights at all: it has no softmax attention attnviz can read (state-space, recurrent or linear-attention layers, as in Mamba, RWKV or xLSTM)"),
    'xmod': ('all stages', 'built with a default language (set_default_language: one adapter a language); attnviz runs it in that language'),
    'yoso': ('refused', 'does not attend token to token: its attention weights come as (1, 16, 32) for 16 tokens, not a [head, query, key] map (local windows, hashed buckets or an approximation of softmax)'),
    'youtu': ('all stages', ''),
    'zamba': ('all stages', 'hybrid: both of its 2 blocks apply one shared attention block (tied weights); each application is a layer'),
    'zamba2': ('all stages', 'hybrid: only its 1 softmax attention layer(s) of 2 blocks are traced'),
    'zaya': ('all stages', ''),
}  # fmt: skip


OUTCOME_TITLES = {
    ALL: "All stages (scores, scaled, masked, weights), equal to transformers' eager attention",
    WEIGHTS: "Weights only (the family computes attention in its own code, which attnviz cannot reach)",
    REFUSED: "Refused at load, with a message that says why and what to use instead",
    NOT_BUILT: "Not covered: the matrix cannot build a tiny model of the family from its default config",
}


def render_doc() -> str:
    """docs/models.md, from FAMILIES."""
    from importlib.metadata import version

    counts = {o: sorted(t for t, (out, _) in FAMILIES.items() if out == o) for o in OUTCOME_TITLES}
    lines = [
        "# Model families: what attnviz gives for each",
        "",
        f"Every text model type of transformers {version('transformers')} (its base-model mapping, without vision, "
        f"audio, video, layout or table models), {len(FAMILIES)} in all, built as a tiny random model from its config "
        "and run through `attnviz.load_model` and `attnviz.trace` by `tests/hf/test_family_matrix.py`. An all-stages "
        "family's weights equal transformers' eager attention to 1e-5 (encoder, decoder and cross attention for "
        "encoder-decoders) and the model's output is unchanged; layer counts are the real number of softmax "
        "attention layers (hybrid models report only those) and the head dimension is the one q.k sums over.",
        "",
        "Generated by `python -m tests.hf.families --write-doc` from the table in `tests/hf/families.py`; the test "
        "checks that this page matches it. Run the whole matrix with `ATTNVIZ_FAMILY_MATRIX=all pytest "
        "tests/hf/test_family_matrix.py` (the default run takes a representative subset).",
        "",
        "| outcome | families |",
        "|---|---|",
        *(f"| {OUTCOME_TITLES[o].split(' (')[0].split(',')[0]} | {len(v)} |" for o, v in counts.items()),
        "",
    ]
    for outcome, title in OUTCOME_TITLES.items():
        if not counts[outcome]:  # no family has this outcome (the table above says 0)
            continue
        lines += [f"## {title}: {len(counts[outcome])}", ""]
        if outcome == ALL:
            plain = [t for t in counts[outcome] if not FAMILIES[t][1]]
            lines += [", ".join(f"`{t}`" for t in plain), "", "With something to know:", ""]
            lines += [f"- `{t}`: {FAMILIES[t][1]}" for t in counts[outcome] if FAMILIES[t][1]]
        else:
            lines += ["| family | why |", "|---|---|"]
            lines += [f"| `{t}` | {FAMILIES[t][1]} |" for t in counts[outcome]]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - a developer's tool
    import os
    import tempfile

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if "--write-doc" in sys.argv:
        DOC.write_text(render_doc())
        print(f"wrote {DOC}")
        sys.exit(0)
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        res = run_matrix(args or text_families(), Path(tmp), log=lambda s: print(s, flush=True))
        print(f"{len(res)} families in {time.perf_counter() - t:.0f} s")
    if "--json" in sys.argv:
        print(json.dumps({r.model_type: [r.outcome, r.detail, r.labels] for r in res}))
