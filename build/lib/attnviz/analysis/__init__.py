"""Numbers behind the pages: pure functions of an AttentionTrace (numpy), no streamlit, no plotly.

stats    histograms, normal reference curves, row maximum and entropy
law      the 1/sqrt(d) law on random vectors
scaling  one layer re-derived with another scale (the Scaling page)
masks    mask experiments: forbidden cells, leaks, fully masked rows (the Masks page)
"""
