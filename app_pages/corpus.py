"""Corpus: every head of a model across a corpus (a saved HeadProfile, see docs/corpus.md). Layout only."""

from pathlib import Path

import streamlit as st

from attnviz import settings, ui
from attnviz.corpus import maps
from attnviz.errors import AttnvizError
from attnviz.plots import corpus as cp
from attnviz.ui import corpus as corpus_ui
from attnviz.ui import corpus_geometry

src = ui.current()
st.title("Corpus")
st.markdown(
    "Every head of a model across a whole corpus, not one sentence: a **head profile** holds each head's statistics "
    "averaged over the texts, the Jensen-Shannon distances between the heads' attention rows, and example rows. "
    "Find heads by two statistics, see which heads attend alike, and open an example on the Heads page."
)
conf = settings.current()
root = Path(conf.profiles_dir)


folders = maps.profile_folders(root)
if not folders:
    st.info(
        f"No head profile in the profiles folder ({ui.literal(str(root))}, set by ATTNVIZ_PROFILES_DIR). Make one "
        "of the corpus that ships with attnviz (325 texts) with this command, then reload this page:"
    )
    st.code(f"python -m attnviz profile --model bundled --out {root / 'bundled'}", language="bash")
    if not conf.hosted and st.button(
        f"Profile the bundled corpus with {ui.literal(src.model.label)}", icon=":material/play_arrow:"
    ):
        root.mkdir(parents=True, exist_ok=True)
        if built := corpus_ui.build_profile(src.model, root):
            st.session_state["cp_profile"] = built
        folders = maps.profile_folders(root)
    if not folders:
        st.stop()

names = [p.name for p in folders]
chosen = ui.url_choice(st.selectbox, "Profile", names, key="cp_profile")
folder = root / chosen
try:
    prof = corpus_ui.opened_profile(str(folder), (folder / "provenance.json").stat().st_mtime)
except (AttnvizError, OSError) as e:
    ui.show_error(e if isinstance(e, AttnvizError) else f"Could not read {chosen!r}: {e.strerror or e}.")
    st.stop()
stats = maps.statistic_names(prof)
st.caption(ui.literal(maps.profile_summary(prof)))
heads = {f"{y}-{h}": f"layer {y}, head {h}" for y in range(prof.n_layer) for h in range(prof.n_head)}


def _pick(name: str) -> None:
    """A click on a chart of heads: its head becomes the chosen one."""
    tile = ui.selected_head(st.session_state.get(name), prof.n_layer, prof.n_head)
    if tile is not None:
        st.session_state["cp_head"] = f"{tile[0]}-{tile[1]}"


def _head_chart(fig, name: str, *parts: str) -> None:
    """A chart of heads whose clicked point picks the head (the finder and the map)."""
    ui.chart(fig, "corpus", *parts, key=name, on_select=lambda: _pick(name))


st.subheader("Find heads", divider="gray")
colours = {"layer": "layer"} | ({"kv_group": "key/value head"} if int(prof.provenance.get("kv_groups", 1)) > 1 else {})
left, middle, right = ui.columns("cp-axes", 3)
x = ui.url_choice(left.selectbox, "x", stats, key="cp_x", default="entropy" if "entropy" in stats else None)
y = ui.url_choice(middle.selectbox, "y", stats, key="cp_y", default="sink" if "sink" in stats else None)
colour = ui.url_choice(right.selectbox, "Colour by", colours | {s: s for s in stats}, key="cp_colour")
choice = st.session_state.get("cp_head", st.query_params.get("cp_head"))  # the select box comes further down
choice = choice if choice in heads else None
picked = tuple(int(v) for v in choice.split("-")) if choice else None
st.caption("Every head is a point; hover for its numbers, **click one** to pick it.")
_head_chart(cp.head_finder(prof, x, y, colour, picked), "cp-finder", "heads", x, y)

st.subheader("Heads that attend alike", divider="gray")
if prof.distance is None:
    st.info("This profile has no head distances (it was made with distances off), so there is no map of them.")
else:
    st.caption(
        "Classical multidimensional scaling of the Jensen-Shannon distances between every two heads' "
        "attention rows, averaged over the corpus: heads close together attend alike."
    )
    coords = corpus_ui.head_map(prof, str(folder), (folder / "provenance.json").stat().st_mtime)
    _head_chart(cp.head_map(coords, prof, colour, picked), "cp-map", "map")

st.subheader("One head's examples", divider="gray")
choice = ui.url_choice(st.selectbox, "Head", heads, key="cp_head")
layer, head = (int(v) for v in choice.split("-"))
examples = maps.head_examples(prof, layer, head)
if not examples:
    st.info("The profile keeps no example rows for this head.")


def _open_on_heads(text: str) -> None:
    st.session_state["text"] = text[: ui.TEXT_LIMITS["text"]]
    st.session_state["pair"] = ""
    ui.open_head(src, layer, head)


st.caption(
    "The rows the profile kept, its strongest and some drawn from weaker ones: each is a small heatmap of the "
    "query's row (framed in red) and the rows around it, traced again live when the sidebar's model is the "
    "profile's (else the stored row's strongest keys alone). Opening one loads its text into the sidebar with "
    f"{ui.literal(src.model.label)}."
)
grid = st.columns(2)
for i, ex in enumerate(examples):
    with grid[i % 2].container(border=True):
        title = f"text {ex['text_id']}, query {ex['query']}: top weight {ex['max_weight']:.2f} ({ex['kind']})"
        stamp = (folder / "provenance.json").stat().st_mtime
        rows = corpus_ui.example_rows(src.model, prof, src.model.label, str(folder), stamp, ex)
        tokens = None if rows else maps.example_tokens(src.model, prof, ex["text"])
        fig = cp.example_heatmap(ex, title, rows, tokens)
        ui.chart(fig, "corpus", f"layer{layer}", f"head{head}", f"example{i}")
        st.caption(ui.literal(ex["text"][:200] + ("…" if len(ex["text"]) > 200 else "")))
        if st.button(
            "Open on Heads",
            key=f"cp_open_{i}",
            icon=":material/open_in_new:",
            on_click=_open_on_heads,
            args=(ex["text"],),
        ):
            st.switch_page("app_pages/heads.py", query_params={})

corpus_geometry.query_key_section(prof, layer, head)

with st.expander("Provenance: what produced this profile", icon=":material/info:"):
    ui.record_table({k: v for k, v in sorted(prof.provenance.items())})
