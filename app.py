"""attnviz: the frame around every page (shared sidebar, URL state) and the navigation."""

import sys

import streamlit as st

st.set_page_config(page_title="attnviz: see transformer attention", page_icon="🔍", layout="wide")
# A cold start imports torch and transformers for seconds before anything could be drawn: say so first (only then).
starting = st.empty()
if "attnviz.ui" not in sys.modules:
    starting.info("Starting attnviz: loading torch, transformers and the model…", icon=":material/hourglass_top:")

from attnviz import ui  # noqa: E402 - after the notice above, on purpose

starting.empty()
ui.setup()
st.html(ui.screen_look())  # charts follow a dark theme on screen; their files stay print-ready
# The tab starts Plotly's script now if it has not already: otherwise a session's first chart would ask for it only
# after Streamlit's frontend had fetched the code of every element above it (a link to a running server: 0.4 s later;
# a cold start: this comes before the model loads). The same element in every run (and hidden), so nothing below it
# moves: Streamlit would mount every chart again.
st.html(ui.plotly_preload(), unsafe_allow_javascript=True)

# Embedded, Streamlit hides its running indicator with the rest of its chrome, so a reader saw blank space while a
# page computed: the main area says "Computing…" in a corner while the script runs (the app marks its state on its
# container), on a first load and after every change, and the note goes when the run ends, however it ends.
EMBED_STYLE = """<style>
[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl'], [data-testid='stExpandSidebarButton']
  {display: none !important}
[data-testid='stApp'][data-test-script-state='running'] [data-testid='stMain']::before {
  content: "Computing…"; position: fixed; top: 0.5rem; right: 0.75rem; z-index: 1000; padding: 0.2rem 0.7rem;
  border-radius: 0.8rem; font-size: 0.85rem; background: light-dark(#f0f2f6, #262730); color: light-dark(#31333f, #fafafa);
  animation: attnviz-busy 1.2s ease-in-out infinite alternate;
}
@keyframes attnviz-busy {from {opacity: 1} to {opacity: 0.45}}
</style>"""
# Sections keep every page in sight (a flat list of 13 folded three behind "View 3 more"); the URL of a page is its
# file name either way, so links made before the sections still open the same pages.
PAGES = {
    "Attention": [
        st.Page("app_pages/heads.py", title="Heads", icon=":material/grid_view:", default=True),
        st.Page("app_pages/scaling.py", title="Scaling", icon=":material/functions:"),
        st.Page("app_pages/masks.py", title="Masks", icon=":material/visibility_off:"),
        st.Page("app_pages/module.py", title="Our module", icon=":material/build:"),
        st.Page("app_pages/scores.py", title="Score functions", icon=":material/calculate:"),
    ],
    "Analyses": [
        st.Page("app_pages/headstats.py", title="Head statistics", icon=":material/leaderboard:"),
        st.Page("app_pages/geometry.py", title="Query-key space", icon=":material/scatter_plot:"),
        st.Page("app_pages/rollout.py", title="Rollout", icon=":material/account_tree:"),
        st.Page("app_pages/neuron.py", title="Neuron view", icon=":material/hub:"),
        st.Page("app_pages/words.py", title="Words", icon=":material/text_fields:"),
        st.Page("app_pages/pairs.py", title="Sentence pairs", icon=":material/compare_arrows:"),
        st.Page("app_pages/compare.py", title="Compare", icon=":material/difference:"),
        st.Page("app_pages/ablation.py", title="Ablation", icon=":material/content_cut:"),
    ],
    "Corpus": [st.Page("app_pages/corpus.py", title="Corpus", icon=":material/library_books:")],
    "Data": [st.Page("app_pages/export.py", title="Export", icon=":material/download:")],
}
# ?embed=true (Streamlit's own switch; read with st.context): a page in an iframe of a course page or a blog shows
# its figures without the frame. The sidebar's widgets still run, since they read and check the view in the URL,
# but the sidebar is hidden, and so are the navigation, the share link and the history entries.
embedded = st.context.is_embedded
if embedded:
    st.html(EMBED_STYLE)  # first, so the sidebar never shows, not even while a cold start loads the model
page = st.navigation(PAGES, position="hidden" if embedded else "sidebar", expanded=True)
# A cold start loads the model in the sidebar: meanwhile the main area shows the default view's heatmaps from the
# trace made ahead (ui.first_view), kept until the live page below has drawn, or else says the model is loading.
notice = ui.loading_notice(page)
ui.sidebar()
if not ui.showing_first_view():
    notice.empty()
if not embedded:
    ui.copy_link()
    ui.keep_history()  # Back and Forward move between views
try:
    page.run()
finally:
    notice.empty()
