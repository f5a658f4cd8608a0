"""A sample of every head's queries and keys across a corpus, for one head's query-key space on the Corpus page.

Which tokens: texts in the order of a seeded priority per text, and from each text at most `per_text` of its tokens
(by a seeded priority per position), until `samples` tokens are taken. Of every sampled token both its query and its
key are kept, so a head's keys come from the same texts (the same tokens) as its queries. Why by text, not token by
token: q·k is attention only between a query and the keys of its own text, so the correlation of q·k with −distance
is computed over pairs within a text; a token-uniform sample of a large corpus puts nearly every token in a text of its
own and leaves no pair. Why the same tokens in every head: one table of tokens, and heads compared point for point.
Tokens of long texts are under-represented against a token-uniform sample (a text gives at most `per_text`).

The reducer (`Choice`) decides which texts are chosen by (priority, text id, tokens it offers), at most `samples`
entries, a bounded selection that merges exactly (the total order (priority, text id) decides every tie), so one
pass, shards, a resumed run and Ray agree. Only that choice is written with a shard's state: the vectors in every
shard file would make each as large as the whole sample (an 8B model's 1,024 heads in every one of its shards). The
vectors of a chosen text are kept in memory from the trace that was read anyway (a text that cannot be chosen any
more is never copied, and one that drops out is let go); texts chosen in a shard read back from disk or done by a Ray
worker are traced once more at the end (`take`). A shard's own choice starts empty, so nearly every text of a shard
is chosen there for a while: a shard computed in the run's process is told where the choice of the shards before it
ends (`Choice.last`, set as its `bound`), and copies the vectors of no text after that, as none can be chosen in the
whole (without it every text of a corpus had its vectors copied and dropped: 9,749 of 10,000 short texts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..analysis.geometry import layer_notes
from ..checks.objects import PROFILE_SETTINGS
from ..errors import InputError
from ..trace import AttentionTrace
from .reducers import priorities_at

TEXT_SALT, POSITION_SALT = 0x51C7E47, 0x9051710  # these draws apart from the examples' (same seed)
MAX_SAMPLES = PROFILE_SETTINGS["qk_samples"][1]  # tokens: 10,000 points, half of what PCA draws on the page
MAX_PER_TEXT = PROFILE_SETTINGS["qk_per_text"][1]
DTYPES = PROFILE_SETTINGS["qk_dtype"]
CONTEXT = 4  # tokens kept either side of a sampled token, for its hover


def text_priority(seed: int, text: int) -> float:
    return float(text_priorities(seed, [text])[0])


def text_priorities(seed: int, texts) -> np.ndarray:
    """`text_priority` of several texts at once."""
    texts = np.asarray(texts, np.int64)
    return priorities_at(seed ^ TEXT_SALT, texts, np.zeros(len(texts), np.int64), 1, 1)[0, 0]


def eligible(seed: int, text: int, n_tokens: int, per_text: int) -> np.ndarray:
    """A text's at most `per_text` sampled positions, in the order of their seeded priority (the first n are taken)."""
    return eligible_of(seed, [text], [n_tokens], per_text)[0]


def eligible_of(seed: int, texts, lengths, per_text: int) -> list[np.ndarray]:
    """`eligible` of several texts at once (their priorities drawn together)."""
    lengths = np.asarray(lengths, np.int64)
    starts = np.cumsum(lengths) - lengths
    group, query = np.repeat(np.arange(len(lengths)), lengths), np.arange(lengths.sum()) - np.repeat(starts, lengths)
    prio = priorities_at(seed ^ POSITION_SALT, np.repeat(np.asarray(texts, np.int64), lengths), query, 1, 1)[0, 0]
    order = np.lexsort((query, prio, group))  # by text, then priority, ties by position
    return [query[order[a : a + min(per_text, n)]] for a, n in zip(starts, lengths)]


def check_settings(samples: int, per_text: int, dtype: str) -> None:
    if not 0 <= int(samples) <= MAX_SAMPLES or not 1 <= int(per_text) <= MAX_PER_TEXT or dtype not in DTYPES:
        raise InputError(
            f"qk_samples must be 0 (no sample) to {MAX_SAMPLES:,}, qk_per_text 1 to {MAX_PER_TEXT} and qk_dtype one "
            f"of {', '.join(DTYPES)}; got {samples}, {per_text}, {dtype!r}."
        )


@dataclass(frozen=True)
class Drawn:
    """One text's sampled tokens, in priority order: per layer q [head, e, d], k [kv_head, e, d] (the keys a group of
    query heads shares, once), the layer's mask between them [e, e]; a dict per token; the layers' scale and notes."""

    q: list
    k: list
    masks: list
    tokens: list
    scale: list
    notes: list

    def stored(self, dtype: str) -> Drawn:
        """In `dtype`, or float32 where a value is past float16's range (65,504)."""
        if all(a.dtype == np.dtype(dtype) for a in (*self.q, *self.k)):
            return self  # stored already (a float16 value is within its range)
        big = max(float(np.abs(a).max()) for a in (*self.q, *self.k)) > float(np.finfo(np.float16).max)
        cast = np.float32 if big else np.dtype(dtype)
        q, k = [_cast(a, cast) for a in self.q], [_cast(a, cast) for a in self.k]
        return Drawn(q, k, self.masks, self.tokens, self.scale, self.notes)


def _cast(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """a in dtype, rounded as numpy rounds (to nearest, ties to even) but by torch's vectorised conversion: numpy's
    own float32 -> float16 is ~20 times slower, and a GPU's profile spent a tenth of its time there."""
    if a.dtype == np.float32 and dtype == np.float16:
        return torch.from_numpy(np.ascontiguousarray(a)).to(torch.float16).numpy()
    return a.astype(dtype)


CROSS = (
    "Cross-attention's queries and keys belong to two different sequences (the target's and the source's), so a "
    "token has no query and key of one head to sample together."
)


def draw(tr: AttentionTrace, text_id: int, seed: int, per_text: int) -> Drawn | str:
    """A traced text's sampled tokens, or why its trace has no vectors."""
    if not tr.has("vectors"):
        return tr.why_not("vectors")
    if tr.n_keys != tr.n_tokens:
        return CROSS
    pos = eligible(seed, text_id, tr.n_tokens, per_text)
    q, k, masks, at = [], [], [], torch.as_tensor(pos)
    with torch.inference_mode():
        for layer in range(tr.n_layer):
            # what trace.vectors reads (q and k as the model used them, after rotary say), every head at once, and
            # the keys once per key/value head (a query head h of g per group uses key/value head h // g)
            record = tr.layers[layer]
            q.append(record.q[:, at.to(record.q.device)].float().cpu().numpy())
            k.append(record.k[:, at.to(record.k.device)].float().cpu().numpy())
            masks.append(tr.layer_mask(layer)[np.ix_(pos, pos)])
    scale = [float(tr.facts(y).scale) for y in range(tr.n_layer)]
    notes = [layer_notes(tr, y) for y in range(tr.n_layer)]
    return Drawn(q, k, masks, [token_entry(tr.tokens, text_id, int(p)) for p in pos], scale, notes)


def token_entry(tokens, text_id: int, p: int) -> dict:
    """A sampled token's row of the tokens table: where it is, what it is, and the tokens around it."""
    before, after = tokens[max(0, p - CONTEXT) : p], tokens[p + 1 : p + 1 + CONTEXT]
    return {"text_id": text_id, "position": p, "token": tokens[p], "before": list(before), "after": list(after)}


class Choice:
    """The texts a sample takes its tokens from: the smallest priorities, as many as `samples` tokens need; `held`:
    the drawn tokens of chosen texts this process traced."""

    def __init__(self, prio, text, count, samples: int, per_text: int, seed: int, dtype: str = "float32"):
        self.prio, self.text, self.count = np.asarray(prio, np.float64), np.asarray(text, np.int64), np.asarray(count)
        self.samples, self.per_text, self.seed, self.dtype = int(samples), int(per_text), int(seed), dtype
        self.held: dict[int, Drawn] = {}
        self.bound: tuple | None = None  # (priority, text): a text after it is not held (see `last`)

    @classmethod
    def empty(cls, samples: int, per_text: int, seed: int, dtype: str = "float32") -> Choice:
        return cls(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), samples, per_text, seed, dtype)

    def _full(self) -> bool:
        return int(self.count.sum()) >= self.samples

    def update(self, text: int, n_tokens: int, trace: AttentionTrace | None = None, prio: float | None = None) -> None:
        """Offer a text of n_tokens; its trace, when given, gives the vectors if the text is chosen (texts read
        together are offered without one, and those still chosen after them are given theirs by `hold`)."""
        if not self.samples or n_tokens <= 0:
            return
        prio = text_priority(self.seed, text) if prio is None else prio  # given: drawn with others (text_priorities)
        if self._full() and (prio, text) > (self.prio[-1], self.text[-1]):
            return  # comes after every kept text, which already give enough tokens: never chosen
        self._keep(np.r_[self.prio, prio], np.r_[self.text, text], np.r_[self.count, min(self.per_text, n_tokens)])
        if trace is not None and text in set(self.text.tolist()) and self._may_hold(prio, text):
            self.hold(text, draw(trace, text, self.seed, self.per_text))

    def wanted(self, texts) -> list:
        """Those of `texts` that are chosen now, not after `bound`, and whose vectors are not held."""
        kept = dict(zip(self.text.tolist(), self.prio.tolist()))
        return [t for t in texts if t in kept and t not in self.held and self._may_hold(kept[t], t)]

    def last(self) -> tuple[float, int] | None:
        """(priority, text) of the last text kept once the chosen texts give `samples` tokens, else None: a text after
        it is chosen neither here nor in any merge of this choice with others (merging only adds texts before it)."""
        return (float(self.prio[-1]), int(self.text[-1])) if self.samples and self._full() else None

    def _may_hold(self, prio: float, text: int) -> bool:
        return self.bound is None or (prio, text) <= self.bound

    def hold(self, text: int, drawn: Drawn | str) -> None:
        """Keep a chosen text's drawn tokens (a str: its trace has none)."""
        if isinstance(drawn, Drawn):
            self.held[int(text)] = drawn.stored(self.dtype)

    def _keep(self, prio, text, count) -> None:
        """The entries whose tokens are still needed: fewer than `samples` tokens come before them."""
        order = np.lexsort((text, prio))
        before = np.cumsum(count[order]) - count[order]
        order = order[before < self.samples]
        self.prio, self.text, self.count = prio[order], text[order].astype(np.int64), count[order].astype(np.int64)
        kept = set(self.text.tolist())
        self.held = {t: d for t, d in self.held.items() if t in kept}

    def merge(self, other: Choice) -> Choice:
        out = Choice.empty(self.samples, self.per_text, self.seed, self.dtype)
        out.held = {**self.held, **other.held}
        out._keep(np.r_[self.prio, other.prio], np.r_[self.text, other.text], np.r_[self.count, other.count])
        return out

    def chosen(self) -> list[tuple[int, int]]:
        """(text id, tokens taken from it), in priority order: the last text may give fewer than it offers."""
        before = np.cumsum(self.count) - self.count
        take = np.minimum(self.count, self.samples - before)
        return [(int(t), int(n)) for t, n in zip(self.text, take) if n > 0]

    def arrays(self) -> dict:
        meta = np.array([self.samples, self.per_text, self.seed], np.int64)
        return {"prio": self.prio, "text": self.text, "count": self.count, "meta": meta}

    @classmethod
    def from_arrays(cls, a: dict, samples: int, per_text: int, seed: int, dtype: str = "float32") -> Choice:
        if not a:  # a state written without a sample
            return cls.empty(samples, per_text, seed, dtype)
        if a["meta"].tolist() != [samples, per_text, seed]:
            raise InputError("A shard's query-key sample was drawn with other settings: profile again.")
        return cls(a["prio"], a["text"], a["count"], samples, per_text, seed, dtype)


@dataclass(frozen=True)
class Taken:
    """The sampled vectors: q [layer] -> [head, n, d], k [layer] -> [kv_head, n, d], `allowed` [layer, cells]: per
    text in order, its [m, m] block of the layer's mask between its sampled tokens (True = the query may attend the
    key), flattened; `tokens`: one dict per sampled token (text_id, position, token, before, after); `scale` and
    `notes` per layer."""

    q: list
    k: list
    allowed: np.ndarray
    tokens: list
    scale: list
    notes: list


def take(choice: Choice, trace_text, texts: dict, dtype: str) -> Taken | str:
    """The vectors of the chosen tokens: held from the run, or from `trace_text(text)` for a text it does not hold;
    a sentence saying why there are none when the model's traces keep no vectors. Each text gives its first n tokens
    (by priority) in position order, as `Drawn.first` orders them, but every text's vectors are put in that order by
    one index per layer (a text at a time was most of the end of a profile of short texts)."""
    parts, orders = [], []
    for text_id, n in choice.chosen():
        drawn = choice.held.get(text_id) or draw(trace_text(texts[text_id]), text_id, choice.seed, choice.per_text)
        if isinstance(drawn, str):
            return drawn
        parts.append((drawn.stored(dtype), n))
        orders.append(np.argsort([t["position"] for t in drawn.tokens[:n]], kind="stable"))
    if not parts:
        return "No text of the corpus gave a token to sample."
    # float16 unless a text's values are past its range: then the whole sample is float32
    cast = np.result_type(*(d.q[0] for d, _ in parts))
    starts = np.cumsum([0] + [n for _, n in parts])[:-1]
    every = np.concatenate([a + o for a, o in zip(starts, orders)])

    def joined(vectors, y: int) -> np.ndarray:
        return np.concatenate([vectors(d)[y][:, :n] for d, n in parts], axis=1)[:, every].astype(cast)

    layers = range(len(parts[0][0].q))
    blocks = [
        np.stack(d.masks)[:, :n, :n][:, o[:, None], o].reshape(len(layers), -1) for (d, n), o in zip(parts, orders)
    ]
    return Taken(
        [joined(lambda d: d.q, y) for y in layers],
        [joined(lambda d: d.k, y) for y in layers],
        np.concatenate(blocks, axis=1),
        [d.tokens[i] for (d, _), o in zip(parts, orders) for i in o],
        parts[0][0].scale,
        parts[0][0].notes,
    )
