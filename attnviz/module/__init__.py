"""Our own attention module, written from scratch, and tracing a sentence through it.

multihead MultiHeadAttention: projections, split heads, stages, merge (parity with torch.nn.MultiheadAttention)
from_layer a pretrained BERT-style or GPT-2 layer copied into it
scores    ScoreFunction: a score function (attnviz.attention) with its seeded per-head parameters
tracing   ModuleSource (base model, inputs, weights, width, heads, score function) and trace_module
"""
