// plotly.js's own esbuild settings (its esbuild-config.js), minified, with this folder's entry point.
const path = require('path');
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const { glsl } = require('esbuild-plugin-glsl');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const { version } = require('plotly.js/package.json');

esbuild
  .build({
    entryPoints: [path.join(__dirname, 'entry.js')],
    outfile: path.join(__dirname, '..', '..', 'attnviz', 'ui', 'assets', 'plotly-attnviz.min.js'),
    banner: {
      js: `/*! plotly.js v${version} (c) Plotly, Inc., MIT License; attnviz's bundle: scatter, bar, heatmap, scattergl */`,
    },
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    sourcemap: false,
    plugins: [InlineCSSPlugin(), glsl({ minify: true }), environmentPlugin({ NODE_DEBUG: false })],
    alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'info',
  })
  .catch(() => process.exit(1));
