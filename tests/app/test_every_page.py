"""Every page with every kind of trace: a bidirectional WordPiece model (the bundled BERT), a causal GPT-2 with its
byte-level BPE tokenizer, a grouped-query Llama, T5 and BART on each of their three attentions, our module, and a
family that gives only weights (XLNet). Each page must run without an exception, draw a chart or say why it cannot,
and show the provenance of the trace it read.

One AppTest per kind of trace, every page opened in turn in it (the model and its traces are cached once for all
pages), so the whole matrix runs in about a minute.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import APP, charts
from streamlit.testing.v1 import AppTest

PAGES = sorted(str(p.relative_to(Path(APP).parent)) for p in (Path(APP).parent / "app_pages").glob("*.py"))
SOURCE, TARGET = "the cat sat on the mat", "a dog ran away"
KINDS = ["bundled", "gpt2_bpe", "llama", "module", "xlnet"] + [
    f"{m}-{p}" for m in ("t5", "bart") for p in ("encoder", "decoder", "cross")
]


@pytest.fixture(scope="module")
def folders(gpt2_bpe_dir, tiny_llama_dir, tiny_xlnet_dir, family_dir):
    return {
        "gpt2_bpe": gpt2_bpe_dir,
        "llama": tiny_llama_dir,
        "xlnet": tiny_xlnet_dir,
        "t5": family_dir("t5"),
        "bart": family_dir("bart"),
    }


def _state(kind: str, folders: dict, tiny_text: str) -> dict:
    """What the sidebar holds for one kind of trace (set through session state, as tests/helpers.run_page does)."""
    if kind == "bundled":
        return {"text": "The cat sat on the mat because it was unbelievably tired.", "pair": "A dog ran away."}
    if kind == "module":
        return {"text": "The cat sat on the mat.", "source": "module"}
    if kind == "gpt2_bpe":
        return {"text": "The cat sat on the mat because it was unbelievably tired.", "pair": "A dog ran away.",
                "source": "hub", "model": str(folders[kind])}  # fmt: skip
    if kind in ("llama", "xlnet"):
        return {"text": tiny_text, "source": "hub", "model": str(folders[kind])}
    model, part = kind.split("-")
    return {"text": SOURCE, "target": TARGET, "part": part, "layer": 1, "source": "hub", "model": str(folders[model])}


def _problems(at) -> list[str]:
    """What is wrong with the page on show: an exception, nothing drawn and nothing said, no provenance."""
    out = [f"exception: {e.value}" for e in at.exception]
    drawn = charts(at) or at.get("arrow_data_frame") or at.get("download_button")
    said = [*at.info, *at.warning, *at.error]
    if not drawn and not said:
        out.append("neither a chart nor a sentence saying why not")
    panel = any(str(e.label).startswith("Provenance") for e in at.expander)
    if not panel and any(str(i.value).startswith("No head profile") for i in at.info):
        return out  # the Corpus page reads a saved profile, not a trace: with none it says how to make one
    if not panel and not any(str(h.value).startswith("Provenance") for h in at.subheader):  # Export: on the page
        out.append("no provenance panel")
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_runs_draws_or_says_why_and_shows_provenance(kind, folders, tiny_text):
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in _state(kind, folders, tiny_text).items():
        at.session_state[key] = value
    failed = {}
    for page in PAGES:
        at.switch_page(page).run()
        if problems := _problems(at):
            failed[page] = problems
    assert not failed, failed
