"""Where the server listens: `streamlit run app.py` with the committed config binds loopback only, and the
container's start script binds the address it is given. Read from the kernel's socket table (/proc/net/tcp*).
The start script also loads the model before its first visitor."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

from browser.browserkit import free_port, stop, wait_healthy  # the browser tests' server helpers

ROOT = Path(__file__).resolve().parents[1]


def listening(port: int) -> set[str]:
    """Local addresses of the sockets in LISTEN state on `port` (IPv4 dotted, IPv6 as 32 hex digits)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, p = local.split(":")
            if state == "0A" and int(p, 16) == port:
                found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]) if len(address) == 8 else address)
    return found


def serve(cmd: list[str], port: int, host: str, env: dict, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return wait_healthy(proc, port, log, timeout=120, host=host)


def test_streamlit_run_with_the_committed_config_listens_on_loopback_only(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_SERVER_ADDRESS")}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false"]  # fmt: skip
    proc = serve(cmd, port, "127.0.0.1", env, tmp_path / "run.log")
    try:
        assert listening(port) == {"127.0.0.1"}, listening(port)  # not 0.0.0.0, not ::
    finally:
        stop(proc)


def test_the_start_script_binds_the_address_it_is_given(tmp_path):
    """scripts/serve.sh (the container's CMD) passes ATTNVIZ_ADDRESS over the config's 127.0.0.1: a container
    gets 0.0.0.0 by default. 127.0.0.2 is another loopback address, so the test opens nothing to the network."""
    port = free_port()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = dict(
        os.environ,
        PATH=path,
        PORT=str(port),
        ATTNVIZ_ADDRESS="127.0.0.2",
        HF_HUB_OFFLINE="1",
        STREAMLIT_SERVER_COOKIE_SECRET=secrets.token_hex(32),
    )  # a real secret starts it
    log = tmp_path / "serve.log"
    proc = serve([str(ROOT / "scripts" / "serve.sh")], port, "127.0.0.2", env, log)
    try:
        assert listening(port) == {"127.0.0.2"}, listening(port)
        # before any visitor (none comes here), the server loads the model in the background (scripts/serve.py),
        # and with no visitor waiting, traces the default sentence and draws its first figure too
        deadline, warm = time.monotonic() + 240, "attnviz: warm in"
        while warm not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        text = log.read_text()
        assert "attnviz: loaded model 'bundled'" in text and warm in text, text[-2000:]
        steps = next(line for line in text.splitlines() if line.startswith("attnviz: warm-up "))
        assert all(f" {step} " in steps for step in ("setup", "model", "trace", "figure")), steps
        assert "warm-up skipped" not in text
    finally:
        stop(proc)
    script = (ROOT / "scripts" / "serve.sh").read_text()
    assert '--server.address "${ATTNVIZ_ADDRESS:-0.0.0.0}"' in script  # what the image binds when not told


def _accepted(listener: socket.socket) -> socket.socket:
    client = socket.create_connection(listener.getsockname()[:2])
    listener.setblocking(True)
    accepted, _ = listener.accept()
    client.close()
    return accepted


def test_the_start_script_turns_nagles_algorithm_off_on_every_connection():
    # Streamlit binds its listening socket itself (protocol 0), and asyncio turns Nagle's algorithm off only on
    # sockets whose protocol says TCP: a response's body, written after its headers, waited for the client's delayed
    # acknowledgement (40 ms) on every reused connection. scripts/serve.py sets TCP_NODELAY on the listening socket.
    import importlib.util

    from streamlit.web.server.starlette import starlette_server

    spec = importlib.util.spec_from_file_location("attnviz_serve_script", ROOT / "scripts" / "serve.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    bind = starlette_server._bind_socket
    try:
        with bind("127.0.0.1", 0, 8) as listener, _accepted(listener) as conn:  # Streamlit's own: Nagle stays on
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        script.no_delay()
        with starlette_server._bind_socket("127.0.0.1", 0, 8) as listener, _accepted(listener) as conn:
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        starlette_server._bind_socket = bind
