"""Files a user saves name the model they came from, as a short file-name part and never as a server path."""

from __future__ import annotations

from helpers import charts, run_page

import attnviz
from attnviz import export


def test_short_model_names_are_safe_and_never_a_path():
    assert export.short_model_name("all-MiniLM-L6-v2 (bundled)") == "all-MiniLM-L6-v2"
    assert export.short_model_name("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers-all-MiniLM-L6-v2"
    assert export.short_model_name("gpt2") == "gpt2"
    assert export.short_model_name("/home/ann/models/my bert/") == "my-bert"
    assert export.short_model_name("./my-model") == "my-model"
    assert export.short_model_name("~/models/tiny") == "tiny"
    assert export.short_model_name("C:\\\\Users\\\\ann\\\\tiny") == "tiny"
    assert export.short_model_name("../../etc/passwd") == "passwd"
    assert export.short_model_name("///") == "model"


def test_a_local_folder_trace_is_saved_under_the_folder_name(tiny_gpt2_dir):
    tr = attnviz.trace(attnviz.load_model(str(tiny_gpt2_dir)), "the cat sat")
    name = export.file_name(tr, 1, "csv")
    assert name == f"attnviz_{tiny_gpt2_dir.name}_layer1.csv"
    assert "/" not in name and "tmp" not in name.replace(tiny_gpt2_dir.name, "")


def test_the_camera_saves_a_file_named_after_the_model_layer_and_stage():
    at = run_page("app_pages/heads.py", layer=2)
    names = [sent["config"]["toImageButtonOptions"]["filename"] for sent in charts(at)]
    assert "attnviz_all-MiniLM-L6-v2_layer2_weights_heads" in names, names
    assert all(n.startswith("attnviz_all-MiniLM-L6-v2_") for n in names), names
