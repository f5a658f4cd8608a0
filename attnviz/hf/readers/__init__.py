"""Readers: how attnviz reads every stage of a family that computes attention in its own code (BLOOM, Falcon, MPT,
GPT, XGLM, GPT-Neo, GPT-J, CodeGen, GPT-NeoX-Japanese, XLM, FlauBERT, DeBERTa, and BERT-like families), from what
each layer is given.

Such a family never calls the capture seam, so it runs with eager attention. For a family in `READERS`, a
forward pre-hook on every attention module reads what the module is about to use (its input, its ALiBi bias, its
mask) and records one LayerRecord per layer: q and k from the module's own projections, computed as its code
computes them, the module's own scale, the boolean mask, the fill and the bias. The hook changes nothing: the model
runs its own code and its outputs stay the eager ones. The hooks record only inside `recorder.recording`, into that
thread's Recorder and only when it asks for them (`own_code`), so one model shared by several sessions is safe.

A reproduction is trusted only once checked: `install` runs the model with output_attentions=True and compares
the weights computed from the records with the model's own; if they differ beyond float rounding, the hooks are
removed and the model stays weights-only, with a note that says why. Wrong stages are never shown.

Experiments that change attention (causal, hidden keys, another scale or fill) are refused for these families
(`attnviz.hf.tracing`): the model's own code would not apply them, and a trace must not pretend it did.

call     what a reader returns (Call), a table entry (Reader), the row for families that differ only by attribute
         names (Projected), helpers the readers share
bert     BERT-like families, one row each (MegatronBERT, RemBERT, BigBird, ConvBERT, RoFormer, SqueezeBERT, I-BERT,
         MPNet, Nystromformer)
deberta  DeBERTa, DeBERTa-v2 / v3: disentangled position terms as the bias
alibi    BLOOM, MPT, Falcon: ALiBi biases (Falcon: or rotary), fused projections
gpt      OpenAI GPT, XGLM, GPT-Neo, GPT-J, CodeGen, GPT-NeoX-Japanese: their own causal tables, rotary
xlm      XLM, FlauBERT
table    every family's reader, by attention module class
hooks    the forward pre-hooks that record, and the check against the model's own weights at load
"""

from .call import Reader
from .hooks import check, install
from .table import READERS, eager_gives_scores, reader_of

__all__ = ["READERS", "Reader", "check", "eager_gives_scores", "install", "reader_of"]
