"""`python scripts/serve.py run app.py [options]` (scripts/serve.sh): Streamlit's own command line, with the server's heavy start done
before the first visitor arrives.

Streamlit runs the entry script only when a session opens, so a fresh server imported torch, transformers and Plotly
and loaded the model while its first visitor waited (15 s to the first heatmap on a quiet machine). Here a background
thread does that work as the server starts (attnviz.ui.warm_up): the web server answers at once (its health check
included) and a visitor who comes early waits only for what is left, since the model's cache computes each model
once and a second caller waits for the first.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app's folder, where attnviz is


def _warm() -> None:
    t0 = time.perf_counter()
    try:
        from attnviz.ui import warm_up

        warm_up()
    except Exception as e:  # noqa: BLE001 - a failed warm-up leaves a cold start, never a dead server
        print(f"attnviz: warm-up skipped ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
        return
    print(f"attnviz: warm in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


def main() -> None:
    threading.Thread(target=_warm, name="attnviz-warm-up", daemon=True).start()
    from streamlit.web import cli

    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
