"""The Heads page with a generation (AppTest): the sidebar's "Generate new tokens" traces prompt + output, the step
slider draws the rows of one step, the axes mark prompt, output and chat roles, the text is shown literally."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import figures, run_page, z_arrays
from transformers import AutoTokenizer

import attnviz
from attnviz.plots.generation import SPAN_COLOURS
from attnviz.ui import literal

PAGE = "app_pages/heads.py"
CHAT = ("{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<s> assistant {% endif %}")  # fmt: skip


def heads(**state):
    at = run_page(PAGE, **state)
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture(scope="module")
def chat_dir(tiny_llama_dir, tmp_path_factory):
    """The tiny grouped-query Llama (saved with its head) with a chat template on its tokenizer."""
    import shutil

    folder = tmp_path_factory.mktemp("chat-llama")
    shutil.copytree(tiny_llama_dir, folder, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = CHAT
    tok.save_pretrained(folder)
    return folder


def strips(fig: dict) -> dict[str, list[tuple[float, float]]]:
    """role -> the key ranges (x0, x1) its strip covers above the map."""
    out = {}
    for s in fig["layout"].get("shapes", []):
        if s.get("yref", "").endswith("domain"):
            out.setdefault(s["name"], []).append((s["x0"], s["x1"]))
    return out


def test_a_step_draws_the_rows_that_step_read(tiny_gpt2_dir, tiny_text):
    expected = attnviz.generate(attnviz.load_model(str(tiny_gpt2_dir)), tiny_text, 5)
    P = expected.generation.prompt_length
    at = heads(source="hub", model=str(tiny_gpt2_dir), text=tiny_text, gen=5, gen_step=2, layer=1, head=3)
    detail = figures(at)["head_detail"]
    np.testing.assert_allclose(z_arrays(detail)[0], expected.stages(1).weights[3, : P + 2, : P + 2], atol=1e-6)
    assert strips(detail) == {"prompt": [(-0.5, P - 0.5)], "generated": [(P - 0.5, P + 1.5)]}
    grid = figures(at)["head_grid"]
    assert z_arrays(grid)[0].shape == (P + 2, P + 2)
    assert {s["fillcolor"] for s in grid["layout"]["shapes"]} == {SPAN_COLOURS["prompt"], SPAN_COLOURS["generated"]}
    written = [m.value for m in at.markdown if m.value.startswith("**Written by step 2:**")]
    assert written == [f"**Written by step 2:** {literal(expected.generation.texts[2])}"]
    assert any(f"Step 2 of 5 (greedy): rows 0–{P + 1}" in c.value for c in at.caption)
    at.slider(key="gen_step").set_value(5).run()
    assert z_arrays(figures(at)["head_detail"])[0].shape == (P + 5, P + 5)


def test_chat_template_roles_are_marked(chat_dir, tiny_text):
    at = heads(source="hub", model=str(chat_dir), text="the cat sat", gen=2, gen_chat=True)
    roles = strips(figures(at)["head_detail"])
    assert roles["user"] == [(-0.5, 5.5)] and roles["assistant"] == [
        (5.5, 7.5)
    ]  # <s> user the cat sat </s> | <s> assistant
    assert "prompt" not in roles and roles["generated"][0][0] == 7.5


def test_an_encoder_ignores_a_generation_request(tiny_text):
    at = heads(gen=5)  # the bundled BERT encoder: no language-model head, no generation, the plain trace
    assert z_arrays(figures(at)["head_detail"])[0].shape == (13, 13)
    assert not [s for s in at.slider if s.key == "gen_step"]
