"""Every family's reader, by the class of its attention module."""

from __future__ import annotations

from . import alibi, bert, deberta, gpt, xlm
from .call import Reader


def _by_class(rows: dict[str, Reader]) -> dict[str, Reader]:
    """'<module>.<class>' -> 'transformers.models.<module>.modeling_<module>.<class>', where transformers defines it."""
    return {f"transformers.models.{m}.modeling_{m}.{cls}": r for key, r in rows.items() for m, cls in [key.split(".")]}


#: Attention module classes (module path and class name) whose own code attnviz reads.
READERS = {name: r for family in (alibi, gpt, xlm, bert, deberta) for name, r in _by_class(family.ROWS).items()}


def reader_of(module) -> Reader | None:
    return READERS.get(f"{type(module).__module__}.{type(module).__qualname__}")


def eager_gives_scores(model) -> bool:
    """Whether the model's output_attentions are its masked scores, not its weights (SqueezeBERT): their softmax is."""
    return any(r is not None and r.returns == "masked" for r in map(reader_of, model.modules()))
