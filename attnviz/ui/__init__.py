"""The dashboard frame: shared sidebar, URL state, cached models and traces.

The only attnviz package that imports streamlit. Pages call `ui.current()`, `ui.get_trace(...)` and
the widgets here; they never load models or compute anything themselves.

State lives in widget keys bound to the URL (`bind="query-params"`), so a link reproduces the view
and survives page switches and reloads. Streamlit ignores and removes a query value a widget cannot
take (layer=99, a head of -1, garbage), so bad links fall back to defaults instead of failing.
"""

from .before_softmax import scale_note
from .charts import chart, chart_config, screen_look
from .clicks import (
    point_in,
    selected_head,
    selected_key,
    selected_point,
    selected_tile,
    toggle_head,
)
from .data import get_model, get_trace, induction_text, loading_notice, saved_trace, setup, trace_of_text, warm_up
from .first_view import showing_first_view
from .generation import generation_settings, generation_steps
from .heavy import LIGHT_TOKENS, heavy
from .kv_groups import grid_groups
from .literal import literal, record_table, show_error
from .pair_ui import boundary_caption, find_pair_boundary, first_sentence_length, pair_boundary
from .plotly_view import plotly_preload
from .provenance import provenance, stop
from .readers import who_reads
from .sidebar import current, module_preview, module_settings, score_sources, sidebar
from .sinks import leave_out_first, sink_map, sinks_and_softcap, without_sinks
from .state import (
    DEFAULT_TEXT,
    FILL_IDS,
    FILL_LABELS,
    INPUT_LABELS,
    PARTS,
    SOURCES,
    STAGE_HELP,
    TEXT_LIMITS,
    URL,
    WEIGHT_LABELS,
    Selection,
    copy_link,
    fill_value,
    keep_history,
    max_tokens,
    server_max_tokens,
    text_inputs,
    url_choice,
)
from .widgets import (
    attention_view,
    colour_range,
    columns,
    count_slider,
    grid_first_head,
    head_picker,
    key_choice,
    open_head,
    open_key,
    scroll_to,
    section,
    stage_picker,
    token_window,
)

__all__ = [
    "DEFAULT_TEXT",
    "FILL_IDS",
    "FILL_LABELS",
    "INPUT_LABELS",
    "PARTS",
    "SOURCES",
    "STAGE_HELP",
    "TEXT_LIMITS",
    "URL",
    "WEIGHT_LABELS",
    "Selection",
    "attention_view",
    "chart",
    "chart_config",
    "screen_look",
    "plotly_preload",
    "colour_range",
    "columns",
    "copy_link",
    "current",
    "fill_value",
    "find_pair_boundary",
    "first_sentence_length",
    "generation_settings",
    "generation_steps",
    "get_model",
    "get_trace",
    "head_picker",
    "keep_history",
    "induction_text",
    "key_choice",
    "literal",
    "loading_notice",
    "max_tokens",
    "module_preview",
    "module_settings",
    "open_head",
    "pair_boundary",
    "boundary_caption",
    "provenance",
    "record_table",
    "saved_trace",
    "scale_note",
    "score_sources",
    "scroll_to",
    "section",
    "selected_tile",
    "server_max_tokens",
    "setup",
    "showing_first_view",
    "show_error",
    "sidebar",
    "sinks_and_softcap",
    "stage_picker",
    "stop",
    "text_inputs",
    "token_window",
    "trace_of_text",
    "warm_up",
    "url_choice",
    "grid_groups",
    "who_reads",
    "leave_out_first",
    "sink_map",
    "without_sinks",
    "selected_head",
    "selected_key",
    "toggle_head",
    "open_key",
    "point_in",
    "selected_point",
    "LIGHT_TOKENS",
    "heavy",
    "count_slider",
    "grid_first_head",
]
