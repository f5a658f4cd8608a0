"""Every figure attnviz draws: AttentionTrace (numpy) -> plotly Figure. Never calls streamlit.

heatmaps       per-head attention heatmaps, head grids, the layer x head overview
distributions  histograms of scores, softmax comparisons, the 1/sqrt(d) law (Scaling page)
masks          the Masks page: stages around the mask, where the weight went, leaks, fully masked rows
sinks          first-token and learned sinks per layer x head, the learned sink's share of each query
softcap        scores before and after logit softcapping (Heads page)

Shared conventions: positional axes with "%03d token" tick labels (repeated tokens stay apart),
tokens escaped before they reach Plotly labels, explicit colour scales and zmin/zmax (so light and
dark themes read the same), NaN for masked cells, float32 arrays.
"""
