// attnviz's chart: one Plotly.react per change on an element that stays mounted (attnviz/ui/plotly_view.py).
// loadPlotly comes from load_plotly.js, prepended to this file.
// `data` is the UTF-8 of {"figure": {data, layout}, "config": {...}, "script": "<Plotly's script, from the app's root URL>"}.

// A click, in st.plotly_chart's selection form, so that attnviz.ui.clicks reads both alike.
function pointsOf(event) {
  return (event.points || []).map((p) => ({
    curve_number: p.curveNumber,
    point_number: p.pointNumber,
    point_index: p.pointIndex,
    x: p.x,
    y: p.y,
    customdata: p.customdata,
  }));
}

function chartElement(parent) {
  let div = parent.querySelector(":scope > div.attnviz-chart");
  if (!div) {
    div = document.createElement("div");
    div.className = "attnviz-chart";
    parent.appendChild(div);
    // the sidebar opening or closing changes the width with no window resize (a height change is the chart's own)
    let width = parent.clientWidth;
    div.attnvizResize = new ResizeObserver(() => {
      if (parent.clientWidth === width) return;
      width = parent.clientWidth;
      if (window.Plotly && div._fullLayout) window.Plotly.Plots.resize(div);
    });
    div.attnvizResize.observe(parent);
  }
  return div;
}

// One chart drawn at a time, each in a task of its own, the one highest on the page first: the browser paints a chart
// (and handles what else waits, Streamlit's own updates included) before it draws the next, so the top of a page shows
// first instead of every chart at once after the last. That order also holds on a first visit, where every chart of
// the page waits for Plotly's script and asks in the order its element mounted (the lowest first, as measured). A draw
// that has not settled after TURN_MS no longer holds the charts after it.
const TURN_MS = 5000;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const waiting = []; // {div, draw, resolve, reject}: the charts waiting for their turn
let drawing = false;

function inTurn(div, draw) {
  return new Promise((resolve, reject) => {
    waiting.push({ div, draw, resolve, reject });
    if (!drawing) takeTurns();
  });
}

function highestFirst(a, b) {
  return a.div.compareDocumentPosition(b.div) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1;
}

async function takeTurns() {
  drawing = true;
  while (waiting.length) {
    await pause(0);
    const turn = waiting.sort(highestFirst).shift();
    const drawn = Promise.resolve().then(turn.draw);
    drawn.then(turn.resolve, turn.reject);
    await Promise.race([drawn.catch(() => undefined), pause(TURN_MS)]);
  }
  drawing = false;
}

// The camera's options (its file name names the layer and the head) without a new plot: Plotly.react draws a chart
// from scratch (Plotly.newPlot, then react again) when its config differs from the last, and the camera reads these
// options only when clicked. So a new file name in the same format is put in place first, and the config Plotly then
// compares is the one it has. A new format still goes through Plotly, which writes the button's tooltip anew.
function keepImageOptions(div, config) {
  const had = div._context && div._context.toImageButtonOptions;
  const options = config.toImageButtonOptions;
  if (had && options && had.format === options.format) div._context.toImageButtonOptions = options;
}

export default function ({ parentElement, data, setTriggerValue }) {
  const text = new TextDecoder().decode(data);
  const div = chartElement(parentElement);
  div.attnvizSend = setTriggerValue; // the latest run's sender
  if (div.attnvizText !== text) {
    div.attnvizText = text;
    const { figure, config, script } = JSON.parse(text);
    loadPlotly(script)
      .then((Plotly) =>
        inTurn(div, async () => {
          // a newer figure for this chart, or the chart gone, while it waited: nothing to draw
          if (div.attnvizText !== text || !div.isConnected) return;
          keepImageOptions(div, config);
          await Plotly.react(div, figure.data, figure.layout, { responsive: true, ...config });
          if (!div.attnvizClicks) {
            div.attnvizClicks = true;
            div.on("plotly_click", (event) => div.attnvizSend("selection", { points: pointsOf(event) }));
          }
        }),
      )
      .catch((error) => {
        div.attnvizText = undefined;
        div.textContent = `This chart could not be drawn: ${error.message}. Reload the page to try again.`;
      });
  }
  return () => {
    // unmounted (or replaced before this call's module was ready): the next call starts from a new element
    div.attnvizResize.disconnect();
    if (window.Plotly) window.Plotly.purge(div);
    div.remove();
  };
}
