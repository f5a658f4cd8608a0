"""A profile's partial state: every reducer of a range of texts, merged with another range's by `merge`, written to a
shard file and read back without pickle (numpy arrays in an .npz, a few JSON numbers)."""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..analysis.heads import punctuation_keys
from ..trace import AttentionTrace
from . import batch
from .examples import Examples
from .qk_sample import Choice, check_settings
from .reducers import Divergence, Histogram, Means, sampled_rows
from .rows import Scratch, TextSums, cells_on, window_cells, windows

COUNTS = ("texts", "tokens", "rows", "cut", "dropped_tokens", "empty", "undecodable")


@dataclass(frozen=True)
class Settings:
    """What decides a profile's numbers besides the model and the corpus (written to its provenance)."""

    max_tokens: int = 128
    bins: int = 20  # the histogram of each row's largest weight
    top: int = 10  # strongest rows kept per head
    intervals: int = 5  # intervals of the largest weight that examples are drawn from
    per_interval: int = 3
    example_keys: int = 8  # strongest keys stored with each example (the whole row reopens from the text)
    seed: int = 0
    distances: bool = True  # Jensen-Shannon divergence between every pair of heads
    distance_rows: int = 4  # rows per text (seeded) the divergence is averaged over; 0: every row
    shard_size: int = 64
    batch: int = 8  # texts a forward (of similar length; attnviz.corpus.batch); 1: one text a forward
    batch_tokens: int = 1024  # padded tokens a forward at most (its window's cells by rows.cells_on besides)
    qk_samples: int = 1_000  # tokens whose query and key every head keeps (attnviz.corpus.qk_sample); 0: none
    qk_per_text: int = 32  # at most this many of them from one text
    qk_dtype: str = "float16"  # how they are stored (float32 doubles the bytes)
    part: str | None = None  # an encoder-decoder's attention: "encoder", "decoder" or "cross" (None: any other model)

    def __post_init__(self):
        check_settings(self.qk_samples, self.qk_per_text, self.qk_dtype)


@dataclass
class ProfileState:
    n_layer: int
    n_head: int
    settings: Settings
    means: Means = field(default_factory=Means)
    histogram: Histogram | None = None
    divergence: Divergence | None = None
    examples: Examples | None = None
    qk: Choice | None = None
    counts: dict = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    scratch: Scratch = field(default_factory=Scratch, repr=False, compare=False)  # reused memory, never saved

    def __post_init__(self):
        s, shape = self.settings, (self.n_layer, self.n_head)
        self.histogram = self.histogram or Histogram.empty(*shape, s.bins)
        if self.divergence is None:
            self.divergence = Divergence.empty(self.n_layer * self.n_head if s.distances else 0)
        self.examples = self.examples or Examples.empty(
            *shape, s.top, s.intervals, s.per_interval, s.example_keys, s.seed
        )
        self.qk = self.qk or Choice.empty(s.qk_samples, s.qk_per_text, s.seed, s.qk_dtype)

    def observe(self, trace: AttentionTrace, text_id: int, special, cells: int | None = None) -> None:
        """Add one traced text: its statistics, its rows' top weights, head distances and example candidates (cells:
        a window's size, by default the one for the trace's device, rows.window_cells)."""
        cells = cells or window_cells(trace)
        has_values, punct = trace.has("values"), punctuation_keys(trace)
        text = lambda device: TextSums(  # noqa: E731 - made where the first window lives
            self.n_layer,
            self.n_head,
            special,
            punct,
            trace.provenance.input_ids,
            device,
            has_values,
            self.scratch,
            trace.n_tokens == trace.n_keys,
        )
        sums, s = None, self.settings
        sample = sampled_rows(s.seed, text_id, trace.n_tokens, s.distance_rows) if s.distances else None
        for win in windows(trace, cells, has_values, self.scratch):
            sums = sums or text(win.weights.device)
            maxw = sums.add(win).double().cpu().numpy()
            self.histogram.update(maxw, win.rows.cpu().numpy())
            self.examples.update(win.weights, win.rows, text_id, win.start, maxw, win.n_keys)
            if self.settings.distances:
                keep = sample[win.start : win.start + win.weights.shape[2]]
                self.divergence.update(win.weights, win.rows, cells, torch.as_tensor(keep, device=win.weights.device))
        sums = sums or text("cpu")
        self.means.update(*sums.values())
        self.qk.update(text_id, trace.n_tokens, trace)
        cut = trace.provenance.n_dropped
        self.counts["texts"] += 1
        self.counts["tokens"] += trace.n_tokens
        self.counts["rows"] += int(sums.rows.max())
        self.counts["cut"] += int(cut > 0)
        self.counts["dropped_tokens"] += int(cut)

    def observe_batch(self, batched: batch.Batched, text_ids: list, specials, cells: int | None = None) -> None:
        """Add texts read together (attnviz.corpus.batch): every reducer takes the batch's one window at once."""
        batch.observe(self, batched, text_ids, specials, cells or cells_on(batched.q.device))

    def skip(self, why: str) -> None:
        self.counts[why] += 1

    def merge(self, other: ProfileState) -> ProfileState:
        counts = {k: self.counts[k] + other.counts[k] for k in COUNTS}
        return ProfileState(
            self.n_layer,
            self.n_head,
            self.settings,
            self.means.merge(other.means),
            self.histogram.merge(other.histogram),
            self.divergence.merge(other.divergence),
            self.examples.merge(other.examples),
            self.qk.merge(other.qk),
            counts,
        )

    def arrays(self) -> dict:
        parts = {
            "means": self.means.arrays(),
            "histogram": self.histogram.arrays(),
            "divergence": self.divergence.arrays(),
            "examples": self.examples.arrays(),
            "qk": self.qk.arrays(),
        }
        return {f"{p}/{k}": np.asarray(v) for p, a in parts.items() for k, v in a.items()}

    def save(self, path: Path, meta: dict) -> None:
        """Write atomically: a shard file either is whole or is not there (a run killed while writing redoes it)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(self.to_bytes(meta))
        os.replace(tmp, path)

    def to_bytes(self, meta: dict | None = None) -> bytes:
        buffer = io.BytesIO()
        np.savez(buffer, __meta__=np.asarray(json.dumps({**(meta or {}), "counts": self.counts})), **self.arrays())
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, n_layer: int, n_head: int, settings: Settings) -> ProfileState:
        return cls.load(io.BytesIO(data), n_layer, n_head, settings)[0]

    @classmethod
    def load(cls, path, n_layer: int, n_head: int, settings: Settings) -> tuple[ProfileState, dict]:
        with np.load(path, allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
        meta = json.loads(str(a.pop("__meta__")))
        part = lambda p: {k.split("/", 1)[1]: v for k, v in a.items() if k.startswith(p + "/")}  # noqa: E731
        hist, div = part("histogram"), part("divergence")
        state = cls(
            n_layer,
            n_head,
            settings,
            Means.from_arrays(part("means")),
            Histogram(hist["counts"]),
            Divergence(div["sums"], div["rows"]),
            Examples.from_arrays(part("examples")),
            Choice.from_arrays(part("qk"), settings.qk_samples, settings.qk_per_text, settings.seed, settings.qk_dtype),
            {k: int(meta["counts"][k]) for k in COUNTS},
        )
        return state, meta
