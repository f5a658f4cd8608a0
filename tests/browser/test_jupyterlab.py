"""The example notebook as someone else receives it: executed by `jupyter nbconvert --execute` (in a fresh install),
opened in a real JupyterLab in Chromium by a viewer who never ran it. Every figure draws, through plotly's own mime
type (JupyterLab does not run the scripts of outputs it did not produce), with nothing fetched from outside, and the
file is at most a third of what it was when every output carried its own plotly.js.

One JupyterLab server, one notebook, one page: the cheapest run that shows it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
from browserkit import OUT, POLL_MS, Tab, free_port, stop

from attnviz.notebook import PLOTLY_MIME

# docs/notebook.ipynb executed the same way at main ffb3757, when every output was HTML with plotly.js inside it.
BYTES_BEFORE = 8_284_897
FIGURES_JS = """() => Array.from(document.querySelectorAll('.jp-OutputArea .js-plotly-plot')).map(gd => ({
  figure: (gd.layout && gd.layout.meta && gd.layout.meta.figure) || '', traces: (gd._fullData || []).length,
  drawn: gd.querySelectorAll('.main-svg .plot > *, .main-svg .hm image, .main-svg .trace').length,
  width: gd.getBoundingClientRect().width, height: gd.getBoundingClientRect().height}))"""


def plotly_outputs(nb) -> list[dict]:
    return [o["data"][PLOTLY_MIME] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if PLOTLY_MIME in o.get("data", {})]  # fmt: skip


def start_jupyterlab(root: Path, port: int, log: Path) -> subprocess.Popen:
    """JupyterLab on 127.0.0.1:`port` serving `root`, no token, its own data folder (so no notebook is trusted
    from an earlier run: the viewer never ran this one) and settings that keep every cell in the page."""
    data, settings = root / ".data", root / ".settings"
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))  # JupyterLab 4 leaves cells out of view undrawn
    note = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    note.parent.mkdir(parents=True)
    note.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    env = dict(os.environ, JUPYTER_DATA_DIR=str(data), JUPYTER_RUNTIME_DIR=str(root / ".runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(root / ".workspaces"))  # fmt: skip
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
           f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--ServerApp.password=",
           "--LabApp.news_url=None", "--allow-root"]  # CI runs as root  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyterlab exited (rc {proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"jupyterlab did not answer in 120 s; see {log}")


def test_an_executed_notebook_draws_every_figure_in_jupyterlab_offline(browser, executed_notebook, tmp_path):
    assert shutil.which("chromium") or shutil.which("chromium-browser")
    size = executed_notebook.stat().st_size
    assert size <= BYTES_BEFORE / 3, f"the executed notebook is {size:,} bytes"
    nb = nbformat.read(executed_notebook, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(o.get("name") != "stderr" for c in code for o in c.outputs)  # no warning box (IProgress, ...)
    expected = [spec["layout"]["meta"]["figure"] for spec in plotly_outputs(nb)]
    assert len(expected) == 13  # heads 3, scaling 4, masks 4, rollout 2
    assert "metadata" not in nb or "signature" not in nb.metadata  # nobody vouched for it: JupyterLab won't trust it

    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(executed_notebook, root / "handout.ipynb")
    OUT.mkdir(parents=True, exist_ok=True)
    shutil.copy(executed_notebook, OUT.parent / "executed_notebook.ipynb")  # to open by hand
    port = free_port()
    proc = start_jupyterlab(root, port, tmp_path / "jupyterlab.log")
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
    try:
        outside = []
        context.route("**/*", lambda r: (outside.append(r.request.url) if "127.0.0.1" not in r.request.url
                                         else None, r.continue_()))  # fmt: skip
        tab = Tab(context.new_page(), f"http://127.0.0.1:{port}")
        tab.page.goto(f"{tab.base}/lab/tree/handout.ipynb", wait_until="domcontentloaded", timeout=120_000)
        tab.page.wait_for_function(f"({FIGURES_JS})().filter(f => f.drawn > 0).length >= {len(expected)}",
                                   timeout=120_000, polling=POLL_MS)  # fmt: skip
        figures = tab.page.evaluate(FIGURES_JS)
        assert [f["figure"] for f in figures] == expected  # every figure of the file, in order, and only those
        assert all(f["traces"] > 0 and f["drawn"] > 0 and f["width"] > 300 and f["height"] > 200 for f in figures)
        assert tab.page.locator(".jp-OutputArea-output .attnviz-static").count() == 0  # plotly's type, not the picture
        assert outside == [], outside  # nothing fetched from any host but the notebook server
        assert tab.page.evaluate("document.querySelectorAll('.jp-OutputArea-output script').length") == 0
        for name, i in (("jupyterlab_heads", 0), ("jupyterlab_scaling", 3), ("jupyterlab_masks", 8)):
            tab.page.locator(".jp-OutputArea .js-plotly-plot").nth(i).scroll_into_view_if_needed()
            tab.page.wait_for_timeout(300)
            tab.page.screenshot(path=str(OUT / f"{name}.png"))
    finally:
        context.close()
        stop(proc)


def test_a_viewer_that_runs_nothing_shows_every_figure_as_a_picture(browser, executed_notebook, tmp_path):
    """What nbviewer or GitHub show: each output's text/html (they do not know plotly's type), scripts not run."""
    nb = nbformat.read(executed_notebook, as_version=4)
    html = [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.outputs
            if "text/html" in o.get("data", {})]  # fmt: skip
    page_file = tmp_path / "static.html"
    page_file.write_text("<!DOCTYPE html><html><body>" + "\n".join(html) + "</body></html>", encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 800}, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(page_file.as_uri())
        boxes = [page.locator(".attnviz-static svg").nth(i).bounding_box() for i in range(13)]
        assert page.locator(".attnviz-static svg").count() == 13 and page.locator("script").count() == 0
        assert all(b and b["width"] >= 700 and b["height"] >= 300 for b in boxes)
        assert page.locator(".attnviz-static svg image").count() >= 13  # every heatmap's cells, the colour bars
        page.screenshot(path=str(OUT / "notebook_static.png"), full_page=True)
    finally:
        context.close()
