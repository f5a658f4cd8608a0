"""A static picture of a plotly figure, made without a browser: an SVG for notebook viewers that run nothing.

A notebook output in plotly's mime type is drawn by JupyterLab, VS Code and Colab; nbviewer, GitHub and a notebook
exported to HTML do not know that type and show the output's text/html instead. That HTML is this picture: inline
SVG, no script, heatmaps as small embedded PNGs (one pixel per cell, at most MAX_CELLS a side), bars, lines,
markers, tick labels, titles, annotations, line shapes, a legend and a colour bar. It reads the figure's JSON (what
plotly.io writes, typed arrays included), so it draws what the interactive figure holds, not a second computation.

Why not kaleido: it installs from PyPI but needs a Chrome on the user's machine and takes seconds per figure; and an
image/png beside plotly's type makes plotly's JupyterLab renderer show that PNG instead of the interactive figure.
"""

from .svg import figure_svg, static_html

__all__ = ["figure_svg", "static_html"]
