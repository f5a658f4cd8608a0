"""Export: the whole trace as .npz with its provenance, a view as one offline HTML file, a saved trace reopened.
Layout only."""

import streamlit as st

from attnviz import export, ui
from attnviz.plots import heatmaps as hm

src = ui.current()
st.title("Export")
st.markdown(
    "Take a trace away and bring it back: the **whole trace** (every layer, all its stages are made from) as a numpy `.npz` file "
    "with a JSON record of what produced it, or the **Heads view** as one HTML file that opens offline in any "
    "browser, figures and data inside. Every chart's camera icon saves that chart as an image."
)
tr = ui.get_trace(src)
if tr is None:
    st.stop()
text, pair = ui.text_inputs()
layer = src.trace_layer
record = export.provenance_record(tr, text=text, pair=pair)

st.subheader("Provenance", divider="gray")
st.caption("What produced this trace; the .npz and the HTML file carry the same record.")
ui.provenance(tr, full=True)

st.subheader("The whole trace (.npz)", divider="gray")
st.markdown(
    export.npz_contents(tr) + ", and `provenance.json`. In Python: "
    "`attnviz.export.load_npz(open(path, 'rb').read())` gives the trace back; plain `numpy.load` reads the arrays."
)
st.download_button(
    "Download the trace (.npz)",
    lambda: export.trace_npz(tr, text=text, pair=pair),
    export.trace_file_name(tr, "trace", "npz"),
    "application/octet-stream",
    icon=":material/download:",
    on_click="ignore",
)

st.subheader("The Heads view as HTML", divider="gray")
st.caption(
    "Every head of the sidebar's layer and one head up close, on a white background, with the provenance table. "
    "plotly.js is inside the file (about 5 MB): it needs no server and no network."
)
stage = ui.stage_picker(tr)
head = ui.head_picker(src)
span = hm.window(tr.n_tokens)
boundary = ui.pair_boundary(src, tr)
figs = [
    hm.head_grid(tr, layer, stage, token_range=span, boundary=boundary),  # the first GRID_HEADS, said in its title
    hm.head_detail(tr, layer, head, stage, token_range=span, boundary=boundary),
]
st.download_button(
    "Download the view (.html)",
    lambda: export.view_html(figs, f"attnviz: {tr.model_name}, layer {layer}, {stage}", record).encode("utf-8"),
    export.trace_file_name(tr, "heads", "html", layer=layer),
    "text/html",
    icon=":material/download:",
    on_click="ignore",
)


def show_saved(saved, saved_record: dict) -> None:
    """The uploaded trace's heads and record. A function, so the trace is never a page variable: the download
    buttons above keep this page's variables alive after the run, and an upload must live only in the byte-bounded
    trace cache (ui.saved_trace)."""
    for note in saved.notes:
        st.caption(ui.literal(note))  # the uploaded file's own notes
    saved_layer = 0
    if saved.n_layer > 1:
        saved_layer = st.slider("Layer of the saved trace", 0, saved.n_layer - 1, 0, key="ex_layer", bind=ui.URL)
    saved_stage = st.segmented_control(
        "Stage of the saved trace",
        hm.drawable(saved),  # value-weighted too when the file holds values
        default="weights",
        required=True,
        key="ex_stage",
        bind=ui.URL,
    )
    saved_stage = saved_stage or "weights"
    first = ui.grid_first_head(saved, key="ex_grid_from")  # a file may hold more heads than a grid draws
    grid = hm.head_grid(saved, saved_layer, saved_stage, token_range=hm.window(saved.n_tokens), first_head=first)
    grid.update_layout(meta={**grid.layout.meta, "figure": "saved_grid"})
    ui.chart(grid, "export", "saved", f"layer{saved_layer}", saved_stage, key="ex_saved_grid")
    with st.expander("Its provenance"):
        rows = export.record_rows(saved_record, full=True)
        ui.record_table(rows)


st.subheader("Open a saved trace", divider="gray")
st.caption("Load an .npz saved here: its heads are shown from the file alone, with the record it carries.")
upload = st.file_uploader("Trace file (.npz)", type=["npz"], key="ex_upload")
with ui.heavy(upload is not None):  # opening and drawing a large file: a few at a time
    if (opened := ui.saved_trace(upload)) is not None:  # within this dashboard's limits; None after saying why
        show_saved(*opened)
        del opened
