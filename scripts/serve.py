"""`python scripts/serve.py run app.py [options]` (scripts/serve.sh): Streamlit's own command line, with the server's heavy start done
before the first visitor arrives.

Streamlit runs the entry script only when a session opens, so a fresh server imported torch, transformers and Plotly
and loaded the model while its first visitor waited (15 s to the first heatmap on a quiet machine). Here a background
thread does that work as the server starts (attnviz.ui.warm_up): a visitor who comes early waits only for what is left,
since the model's cache computes each model once and a second caller waits for the first.

The order is what a first visitor waits for, one thing after the other (one process: its imports take turns on one
core): Streamlit's own start first, so that the health check answers and a browser can start the app's JavaScript, then
the warm-up (attnviz.ui, which a visitor's script imports first; then transformers and the model). Python's cyclic
garbage collector is off until the warm-up is over: the start allocates about a million objects that live as long as
the process, and collecting them again and again cost about a tenth of the imports; they are then frozen (gc.freeze),
so no later collection walks them either (the ~14,000 objects the start leaves in reference cycles stay with them:
collecting them first would cost a second of a full collection while the first visitor's page runs). While the
warm-up runs, Python switches threads every millisecond instead of every five: the warm-up's imports hold the
interpreter for seconds, and the threads that serve the browser's files and the first visitor's run (the default
view's heatmaps made ahead, attnviz.ui.first_view) each wait up to one switch interval for it, again and again.
Every connection the server accepts sends at once (TCP_NODELAY, `no_delay`).
"""

from __future__ import annotations

import gc
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app's folder, where attnviz is

SWITCH_S = 0.001  # Python's thread switch interval while the warm-up runs (the default is 0.005): see _warm
SERVER_WAIT_S = 20  # the warm-up starts anyway after this long without a running server


def _server_started(timeout: float = SERVER_WAIT_S) -> None:
    """Return once Streamlit's runtime runs (its server accepts connections), or after `timeout` seconds."""
    from streamlit.runtime import Runtime, RuntimeState

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if Runtime.exists() and Runtime.instance().state != RuntimeState.INITIAL:
            return
        time.sleep(0.02)


def _warm() -> None:
    t0 = time.perf_counter()
    switching = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)
    try:
        _server_started()
        up = time.perf_counter() - t0
        from attnviz.ui import warm_up

        imported = time.perf_counter() - t0 - up
        warm_up()
    except Exception as e:  # noqa: BLE001 - a failed warm-up leaves a cold start, never a dead server
        print(f"attnviz: warm-up skipped ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
        return
    finally:
        sys.setswitchinterval(switching)
        gc.freeze()  # what the start made lives as long as the process: no collection needs to walk it again
        gc.enable()
    done = f"warm in {time.perf_counter() - t0:.1f} s (server up after {up:.1f} s, attnviz.ui imported in {imported:.1f} s)"
    print(f"attnviz: {done}", file=sys.stderr, flush=True)


def no_delay() -> None:
    """Every connection the server accepts sends at once (TCP_NODELAY). Streamlit 1.67 binds its listening socket
    itself (socket.socket(family): protocol 0) and asyncio turns Nagle's algorithm off only on sockets whose protocol
    says TCP, so every connection kept it on: on a connection in use again, a response's body, written after its
    headers, waited for the browser's delayed acknowledgement (40 ms on Linux). A link loads ~110 files over six
    such connections. The listening socket gets the option here, and the connections it accepts inherit it."""
    from streamlit.web.server.starlette import starlette_server

    bind = starlette_server._bind_socket

    def bind_no_delay(*args, **kwargs) -> socket.socket:
        sock = bind(*args, **kwargs)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    starlette_server._bind_socket = bind_no_delay


def main() -> None:
    gc.disable()  # until the warm-up is over (_warm)
    no_delay()
    threading.Thread(target=_warm, name="attnviz-warm-up", daemon=True).start()
    from streamlit.web import cli

    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
