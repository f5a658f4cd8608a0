"""`profile(model, corpus)`: every head across a corpus, in shards of texts, in this process or on Ray Data.

A shard (`Settings.shard_size` consecutive texts) is the unit of work and of resumption: with an `out` folder, a
finished shard's partial state is written (shards/shard-NNNNNN.npz) before the next starts, and a later call with the
same model, corpus and settings reads the finished shards and does only the others. The total is always the shards'
states folded in shard order, so one pass, a resumed run and a Ray run give the same profile.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .. import checks
from ..checks.objects import PROFILE_SETTINGS, profile_call
from ..errors import InputError
from ..hf import LoadedModel, load_model
from .qk_sample import CROSS, take
from .qk_store import QKSample
from .rows import Scratch
from .shard import check_part, layers_of, run_shard, trace_text
from .state import ProfileState, Settings
from .store import PROVENANCE, VERSION, HeadProfile
from .texts import Corpus, Limits, open_corpus

RUN = "run.json"
DEFAULT_LIMITS = Limits()
PACKAGE_VERSION = "0.2.0"  # attnviz's, as pyproject.toml has it (tests/corpus checks they agree)


@checks.public(name="attnviz.profile", extra=tuple(PROFILE_SETTINGS))
def profile(
    model,
    corpus=None,
    *,
    out=None,
    column: str = "text",
    engine: str = "local",
    progress=None,
    max_shards: int | None = None,
    limits: Limits = DEFAULT_LIMITS,
    workers: int = 2,
    **settings,
):
    """A HeadProfile of `model` (a LoadedModel, a hub id or folder, or "bundled") over `corpus` (None: the corpus that
    ships with attnviz; a path; a list of texts; see attnviz.corpus.texts).

    out: a folder: shards are written there as they finish, the profile at the end, and a run stopped anywhere
    resumes from its last finished shard. engine: "local" (this process) or "ray" (Ray Data: a local runtime, or the
    cluster RAY_ADDRESS names; `workers` actors). progress(texts_done, texts_total, tokens, seconds) is called after
    every shard. max_shards: do at most that many new shards now and return None if the profile is not finished.
    settings: see attnviz.corpus.state.Settings (max_tokens, shard_size, distances, seed, top, intervals, ...); an
    encoder-decoder needs part="encoder", "decoder" or "cross" (a profile per attention)."""
    types = dict(model=LoadedModel, corpus=Corpus, limits=Limits)
    profile_call(model, corpus, out, column, engine, progress, max_shards, limits, workers, settings, types)
    loaded = load_model(model) if isinstance(model, str) else model
    s = Settings(**settings)
    check_part(loaded, s)
    corpus = corpus if isinstance(corpus, Corpus) else open_corpus(corpus, column, limits)
    if s.shard_size < 1 or s.max_tokens < 2 or s.distance_rows < 0:
        raise InputError("shard_size must be at least 1, max_tokens at least 2 and distance_rows at least 0.")
    key = run_key(loaded, corpus, s)
    shards = Path(out) / "shards" if out is not None else None
    if shards is not None:
        _claim(Path(out), key)
    n_shards = -(-corpus.n_texts // s.shard_size)
    if engine == "ray":
        from .ray_engine import run_on_ray

        states = run_on_ray(loaded, corpus, s, _todo(shards, n_shards), workers)
    elif engine == "local":
        states = None
    else:
        raise InputError(f"Unknown engine {engine!r}: choose 'local' or 'ray'.")
    total = _fold(loaded, corpus, s, key, shards, n_shards, states, progress, max_shards)
    if total is None:
        return None
    result = finish(total, loaded, corpus, s)
    if out is not None:
        result.save(out)
    return result


def run_key(loaded, corpus: Corpus, s: Settings) -> dict:
    return {
        "model": loaded.label,
        "revision": loaded.revision,
        "dtype": loaded.dtype,
        "corpus": corpus.describe(),
        "settings": asdict(s),
    }


def _claim(out: Path, key: dict) -> None:
    """Refuse a folder that holds another run (nothing is overwritten); mark it as this run's."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / RUN
    if path.exists():
        if json.loads(path.read_text()) != json.loads(json.dumps(key)):
            raise InputError(
                f"{str(out)!r} holds a profile of another model, corpus or settings: choose another "
                "folder (nothing was changed)."
            )
    elif any(out.iterdir()):
        raise InputError(f"{str(out)!r} is not empty and holds no profile run: choose an empty or new folder.")
    else:
        path.write_text(json.dumps(key, indent=1, sort_keys=True))
    (out / "shards").mkdir(exist_ok=True)


def _shard_path(shards: Path, k: int) -> Path:
    return shards / f"shard-{k:06d}.npz"


def _todo(shards: Path | None, n_shards: int) -> list[int]:
    return [k for k in range(n_shards) if shards is None or not _shard_path(shards, k).exists()]


def _fold(loaded, corpus, s, key, shards, n_shards, states, progress, max_shards) -> ProfileState | None:
    """The shards' states folded in shard order: read from disk when finished before, taken from Ray's results, or
    computed here (and written before the next starts)."""
    total, done, started, tokens = ProfileState(layers_of(loaded, s), loaded.n_head, s), 0, time.monotonic(), 0
    scratch = Scratch()  # one for every shard computed here
    new = 0
    for k in range(n_shards):
        path = None if shards is None else _shard_path(shards, k)
        if path is not None and path.exists():
            state, _ = ProfileState.load(path, layers_of(loaded, s), loaded.n_head, s)
        elif states is not None:
            state = states[k]
        else:
            if max_shards is not None and new >= max_shards:
                return None
            state = run_shard(loaded, corpus, s, k, scratch, total.qk.last())  # no vectors past the choice so far
            new += 1
            tokens += state.counts["tokens"]
        if path is not None and not path.exists():
            state.save(path, {"shard": k})
        total = total.merge(state)
        done = min(corpus.n_texts, (k + 1) * s.shard_size)
        if progress is not None:
            progress(done, corpus.n_texts, tokens, time.monotonic() - started)
    return total


def finish(total: ProfileState, loaded, corpus: Corpus, s: Settings) -> HeadProfile:
    """The HeadProfile of a folded state: means, histogram, divergence, examples and the texts they come from."""
    examples = total.examples.table()
    wanted = set(examples.column("text_id").to_numpy().tolist())
    texts = {i: t for i, t in _texts_of(corpus, wanted)}
    provenance = {
        "model": loaded.label,
        "revision": loaded.revision,
        "dtype": loaded.dtype,
        "device": loaded.device,
        "n_layer": layers_of(loaded, s),
        "part": s.part,
        "n_head": loaded.n_head,
        "kv_groups": _kv_groups(loaded),
        "corpus": corpus.describe(),
        "counts": total.counts,
        "settings": asdict(s),
        "versions": _versions(),
    }
    divergence = total.divergence.result() if s.distances else None
    qk = _qk_sample(total, loaded, corpus, s, provenance)
    return HeadProfile(total.means.result(), total.histogram.counts, divergence, examples, texts, provenance, qk=qk)


def _qk_sample(total: ProfileState, loaded, corpus: Corpus, s: Settings, provenance: dict) -> QKSample | None:
    """The query-key sample's vectors, from its chosen texts traced once more (see attnviz.corpus.qk_sample)."""
    if not s.qk_samples:
        return None
    if s.part == "cross":
        provenance["qk_sample"] = {"why_not": CROSS}
        return None
    texts = dict(_texts_of(corpus, {i for i, _ in total.qk.chosen()}))
    taken = take(total.qk, lambda t: trace_text(loaded, t, s), texts, s.qk_dtype)
    if isinstance(taken, str):
        provenance["qk_sample"] = {"why_not": taken}
        return None
    sample = QKSample(taken)
    provenance["qk_sample"] = {"samples": sample.n, "texts": len(sample.per_text())}
    return sample


def _texts_of(corpus: Corpus, wanted: set):
    if not wanted:
        return
    for i, text, _ in corpus.texts(min(wanted), max(wanted) + 1):
        if i in wanted:
            yield i, text


def _kv_groups(loaded) -> int:
    n_kv = getattr(loaded.model.config, "num_key_value_heads", None) or loaded.n_head
    return max(1, loaded.n_head // int(n_kv))


def _versions() -> dict:
    import pyarrow
    import torch

    return {
        "attnviz": PACKAGE_VERSION,
        "profile_layout": VERSION,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pyarrow": pyarrow.__version__,
    }


__all__ = ["PROVENANCE", "profile", "run_shard"]
