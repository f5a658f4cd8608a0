"""What a figures function returns: a page's figures in the order they are shown, each with its title."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from ..analysis import heads as H

#: Token-looking names of special tokens, for traces given without their tokenizer.
SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>", "<|endoftext|>")


@dataclass(frozen=True)
class Drawn:
    """One page's figures, (title, figure) in the order a notebook shows them. A page lays each one out where it
    belongs, by the figure's own name (`drawn["head_grid"]`: its layout.meta["figure"]). Pages that show numbers
    beside their figures (a table, a caption's counts) get them from a subclass's fields."""

    items: tuple[tuple[str, go.Figure], ...]

    def __iter__(self) -> Iterator[tuple[str, go.Figure]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def __getitem__(self, name: str) -> go.Figure:
        fig = self.get(name)
        if fig is None:
            raise KeyError(f"no figure {name!r} here; there are {', '.join(self.names)}")
        return fig

    @property
    def names(self) -> list[str]:
        return [fig.layout.meta["figure"] for _, fig in self.items]

    def get(self, name: str) -> go.Figure | None:
        return next((fig for _, fig in self.items if fig.layout.meta["figure"] == name), None)

    def title(self, name: str) -> str:
        return next(title for title, fig in self.items if fig.layout.meta["figure"] == name)


def special_positions(trace, special=None) -> np.ndarray:
    """bool [key]: where `trace` holds a special token. `special`: the positions already found (a bool array, as a
    page finds them with its tokenizer), the special tokens' strings, or None (SPECIAL_TOKENS)."""
    if isinstance(special, np.ndarray) and special.dtype == bool:
        return special
    return H.special_keys(trace, special_tokens=SPECIAL_TOKENS if special is None else tuple(special))
