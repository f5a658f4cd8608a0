// Plotly's script, loaded once per tab: by every chart (plotly_view.js, which this file is prepended to) and, at the
// top of every run, by the preload (plotly_view.plotly_preload).

// A path relative to the app's root URL (where Streamlit's own index script is served from, two folders down).
function fromRoot(path) {
  const index = document.querySelector('script[src*="/static/js/index."]');
  return new URL(path, index ? new URL("../../", index.src) : document.baseURI).href;
}

// Plotly's script, once per tab: a classic script (it sets window.Plotly), one promise for the preload and every chart.
function loadPlotly(path) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.attnvizPlotly) {
    window.attnvizPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = fromRoot(path);
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => {
        window.attnvizPlotly = undefined; // the next chart tries again
        reject(new Error("Plotly's script did not load"));
      };
      document.head.appendChild(script);
    });
  }
  return window.attnvizPlotly;
}
