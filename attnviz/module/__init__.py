"""Our own attention module, written from scratch, and tracing a sentence through it.

tracing   ModuleSource (base model, inputs, weights, width, heads, score function) and trace_module
"""
