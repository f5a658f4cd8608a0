// plotly.js with the traces attnviz's figures use: scatter (in the core), bar, heatmap, and scattergl (the query-key
// space above a few thousand points: attnviz/plots/geometry.py). A figure with another trace type would draw
// nothing for that trace: tests/plots/test_one_style.py checks every builder's trace types against TRACES in
// attnviz/ui/plotly_view.py, which lists these.
'use strict';
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap'), require('plotly.js/lib/scattergl')]);
module.exports = Plotly;
