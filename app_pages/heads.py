"""Heads: every head of a layer, one head up close, and every layer x head at a glance. Layout only."""

import streamlit as st

from attnviz import export, figures, ui
from attnviz.plots import heatmaps as hm

src = ui.current()
st.title("Heads")
st.markdown(
    "Each attention **head** decides, for every token (a *query*), how much to read from every token (a *key*)."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
layer = src.trace_layer
where = src.where + (" (a single layer)" if src.single_layer else "")  # "layer 3", "the cross attention, layer 3"
with st.expander("What the stages mean"):
    st.markdown("The model turns each token into a query vector q and a key vector k, then:")
    for name in ui.STAGE_HELP:
        st.markdown(f"- {ui.STAGE_HELP[name]}")
    ui.scale_note(tr, layer)
    if not tr.has("scores"):
        st.markdown(f"Only **weights** can be shown. {ui.literal(tr.why_not('scores'))}")
stage = ui.stage_picker(tr)  # a row of its own: five stages with value-weighted attention
if stage not in hm.PROBABILITIES:
    ui.scale_note(tr, layer)
left, right = ui.columns("stage", [3, 2], vertical_alignment="bottom")
colours = ui.colour_range(stage, left)
with right:
    without = ui.without_sinks(tr, stage)  # key 0 left out of the weights, rows renormalised (said in the titles)
span = ui.generation_steps(tr, hm.MAX_SHOWN) or ui.token_window(tr, hm.MAX_SHOWN)  # a generation: its step
boundary = ui.pair_boundary(src, tr)

st.subheader(f"Every head of {where}")
pick = "Its settings are in the sidebar" if src.single_layer else "Pick the layer in the sidebar"
st.caption(f"{tr.n_head} heads on one colour scale. {pick}; hover a cell for its tokens and value.")
if note := hm.stage_note(tr, layer, stage):
    st.caption(note)
groups = ui.grid_groups(tr, layer, hm.windows(tr, span)[0])  # grouped-query heads drawn by key/value group
first = ui.grid_first_head(tr)  # a model with more heads than a grid draws: which of them
grid = st.container()  # drawn once the head is picked below (the overview outlines it)

st.subheader("One head up close", anchor="one-head")
left, right = ui.columns("head", [1, 2.4], gap="large")
with left:
    head = ui.head_picker(src)
    st.markdown(hm.READING)
    if stage in hm.PROBABILITIES:
        st.markdown(f"Every row of **{stage}** sums to 1: it is how the query shares its attention among the keys.")
    else:
        st.markdown("Score stages are not probabilities: red is above 0, blue below, white is 0.")
    st.caption(
        "Hover a cell to see the query, the key, the weight and (when the model exposes them) the raw and scaled scores."
        " **Click a cell** to pick its column's key in *Who reads this token* below."
    )
drawn = figures.heads(tr, layer, head, stage, colours, span, boundary, without, first, groups)
with grid:
    ui.chart(drawn["head_grid"], f"layer{layer}", stage, "heads")


def _pick_key():
    """A click on the one-head view: its column's key becomes the key of "Who reads this token"."""
    key = ui.selected_key(st.session_state.get("head-detail"), tr.n_keys)
    if key is not None:
        st.session_state["hd_key"] = key
        st.session_state["key_picked"] = True


with right:
    ui.chart(
        drawn["head_detail"],
        f"layer{layer}",
        f"head{head}",
        stage,
        key="head-detail",
        on_select=_pick_key,
    )
    ui.boundary_caption(boundary)
ui.sinks_and_softcap(tr, layer, head)  # attention sinks (gpt-oss), logit softcapping (Gemma 2): only when present
ui.who_reads(tr, layer, where)  # one key's column: the weight every query of every head gives it


def _open_tile():
    """Overview click: jump the sidebar layer and the head slider to the clicked tile."""
    tile = ui.selected_tile(st.session_state.get("overview"))
    if tile is not None:
        ui.open_head(src, *tile)
        st.session_state["tile_opened"] = True


if "overview" in drawn:  # our module is one layer: its overview would repeat the grid
    st.subheader("All layers × heads")
    st.caption(
        "Every head of every layer as a thumbnail (layer 0 is nearest the input). **Click a tile** to open it above."
    )
    ui.chart(
        drawn["overview"],  # the open head's tile is outlined
        "overview",
        stage,
        key="overview",
        on_select=_open_tile,
    )

st.subheader("Export")
st.caption(
    f"{where.capitalize()}: every head and every stage, as a table (CSV) or numpy arrays (.npz). "
    "Use the camera icon on a chart for a PNG."
)
if not export.csv_ok(tr):
    st.caption(
        f"CSV is left out for {tr.n_tokens:,} tokens ({tr.n_head * tr.n_tokens**2:,} rows); the .npz holds the same data."
    )
with st.container(horizontal=True):
    if export.csv_ok(tr):
        st.download_button(
            "Download CSV",
            lambda: export.layer_csv(tr, layer),
            export.file_name(tr, layer, "csv"),
            "text/csv",
            icon=":material/download:",
            on_click="ignore",
        )
    st.download_button(
        "Download .npz",
        lambda: export.layer_npz(tr, layer),
        export.file_name(tr, layer, "npz"),
        "application/octet-stream",
        icon=":material/download:",
        on_click="ignore",
    )

ui.provenance(tr)

if st.session_state.pop("tile_opened", False):  # a tile was clicked: show the head it opened
    ui.scroll_to("one-head")
elif st.session_state.pop("key_picked", False):  # a cell was clicked: show who reads its key
    ui.scroll_to("who-reads")
