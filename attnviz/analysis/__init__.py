"""Numbers behind the pages: pure functions of an AttentionTrace (numpy or torch), no streamlit, no plotly.

stats     histograms, normal reference curves, row maximum and entropy
law       the 1/sqrt(d) law on random vectors
scaling   one layer re-derived with another scale (Scaling page)
masks     mask experiments: forbidden cells, leaks, fully masked rows (Masks page)
pooling   every layer x head shrunk to tiles where the trace lives (the overview)
heads     head statistics and pattern scores (Head statistics page)
rollout   attention rollout and flow
neuron    one query's q, k, products and stages (Neuron view)
scores    dot, scaled dot, general and additive score functions
words     sub-word tokens merged into words
pairs     sentence-pair blocks and the crossing share
compare   two traces or layers, heads ranked by change
scale_site where a layer applied its scale (q, k or the scores)
softcap   scores before and after logit softcapping
sinks     the weight rows give a few keys (first-token sinks) and learned sinks; rows without them
groups    query heads sharing a key/value head, and how alike they attend
"""
