"""What the Corpus page shows of a HeadProfile: the profile folders under one root, every head as a row of its
statistics, a 2-D map of the heads' Jensen-Shannon distances (classical MDS), one head's stored examples."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .store import PROVENANCE, HeadProfile

MAX_FOLDERS = 200  # profile folders listed under one root (a select box, not a file browser)
MAX_EXAMPLES = 12  # examples of one head drawn at once
AROUND = 2  # rows either side of an example's query in its small heatmap
MAX_KEYS = 40  # keys across an example's small heatmap (a window around the query on longer texts)


def profile_folders(root) -> list[Path]:
    """The folders directly under `root` that hold a profile's provenance record, sorted by name (at most
    MAX_FOLDERS); [] when `root` is not a folder. Nothing below the first level is read."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / PROVENANCE).is_file())
    return found[:MAX_FOLDERS]


def statistic_names(prof: HeadProfile) -> list[str]:
    """The profile's statistics that some head defines (a statistic NaN everywhere is left out), sorted."""
    return [k for k in sorted(prof.stats) if np.isfinite(prof.stats[k]).any()]


def classical_mds(distance: np.ndarray, dims: int = 2) -> np.ndarray:
    """[n, dims] coordinates whose Euclidean distances best match `distance` [n, n] (Torgerson's classical MDS):
    double-centre the squared distances, B = -J D² J / 2, and scale the top `dims` eigenvectors of B by the square
    roots of their eigenvalues (negative ones, from distances no plane holds exactly, count as 0). Each axis's sign
    is fixed so that its largest coordinate is positive, so the same distances give the same picture."""
    d = np.asarray(distance, np.float64)
    sq = d**2  # J D² J with J = I - 1/n: each squared distance less its row's and its column's means, plus the mean
    b = -0.5 * (sq - sq.mean(0, keepdims=True) - sq.mean(1, keepdims=True) + sq.mean())
    values, vectors = np.linalg.eigh((b + b.T) / 2)
    top = np.argsort(values)[::-1][:dims]
    coords = vectors[:, top] * np.sqrt(np.clip(values[top], 0.0, None))
    flip = np.sign(coords[np.abs(coords).argmax(axis=0), range(coords.shape[1])])
    return coords * np.where(flip == 0, 1.0, flip)


def head_examples(prof: HeadProfile, layer: int, head: int, most: int = MAX_EXAMPLES) -> list[dict]:
    """One head's stored examples, at most `most`, each with its text: its strongest rows, then the rows drawn from
    each interval of the top weight (at least half the room when there are that many, one of each interval first)."""
    table = prof.example_table  # only this head's rows made into dicts (a profile keeps tens of thousands)
    at = (table.column("layer").to_numpy() == layer) & (table.column("head").to_numpy() == head)
    rows = table.take(np.flatnonzero(at)).to_pylist()
    by_weight = lambda e: (-e["max_weight"], e["order"])  # noqa: E731
    strongest = sorted((e for e in rows if e["kind"] == "strongest"), key=by_weight)
    # one row of each interval first (the weakest rows too), then a second of each, ...
    drawn = sorted((e for e in rows if e["kind"] != "strongest"), key=lambda e: (e["order"], -e["max_weight"]))
    kept = strongest[: max(most - len(drawn), most // 2)]  # the draws from weaker rows get at least half the room
    kept += drawn[: most - len(kept)]
    return [{**e, "text": prof.texts.get(e["text_id"], "")} for e in kept]


def example_tokens(loaded, prof: HeadProfile, text: str) -> list[str] | None:
    """The tokens an example's positions index, from the loaded model's tokenizer, cut as the profile cut its texts;
    None when `loaded` is not the model the profile was made with (its positions would name other tokens)."""
    if loaded is None or loaded.label != prof.provenance.get("model"):
        return None
    from ..hf.encode import encode, token_limit

    most = int(prof.provenance.get("settings", {}).get("max_tokens", 128))
    return encode(loaded.tokenizer, text, None, token_limit(loaded.max_tokens, most)).tokens


def example_rows(loaded, prof: HeadProfile, example: dict, around: int = AROUND, most: int = MAX_KEYS):
    """The example's query row and `around` rows either side, live and exact from the text traced again as the
    profile traced it (its part of an encoder-decoder too), over a window of at most `most` keys around the query:
    {"weights" [rows, keys] float32, "queries" (start, stop), "keys" (start, stop), "query_tokens", "key_tokens",
    "n_keys"}. None when `loaded` is not the profile's model (its trace would be another model's)."""
    if loaded is None or loaded.label != prof.provenance.get("model"):
        return None
    from .shard import trace_text
    from .state import Settings

    known = set(Settings.__dataclass_fields__)
    saved = prof.provenance.get("settings", {})
    tr = trace_text(loaded, example["text"], Settings(**{k: v for k, v in saved.items() if k in known}))
    q, layer, head = int(example["query"]), int(example["layer"]), int(example["head"])
    if not (0 <= q < tr.n_tokens and 0 <= layer < tr.n_layer and 0 <= head < tr.n_head):
        return None
    rows = (max(0, q - around), min(tr.n_tokens, q + around + 1))
    start = max(0, min(q - most // 2, tr.n_keys - most))
    keys = (start, min(tr.n_keys, start + most))
    weights = tr.stages(layer, heads=[head], queries=rows, keys=keys).weights[0]
    return {
        "weights": weights,
        "queries": rows,
        "keys": keys,
        "query_tokens": list(tr.tokens[rows[0] : rows[1]]),
        "key_tokens": list(tr.key_tokens[keys[0] : keys[1]]),
        "n_keys": tr.n_keys,
    }


def profile_summary(prof) -> str:
    """One line on what a profile covers: its model, heads, texts and tokens (counts read as numbers, so a hand-edited
    record cannot put text where a count belongs)."""
    counts = prof.provenance.get("counts", {})
    counts = counts if isinstance(counts, dict) else {}

    def count(name: str) -> str:
        value = counts.get(name, 0)
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "?"

    model = str(prof.provenance.get("model", "?"))[:200]
    part = prof.provenance.get("part")
    model += f" ({part} attention)" if part in ("encoder", "decoder", "cross") else ""
    return f"{model}: {prof.n_layer} layers x {prof.n_head} heads, {count('texts')} texts, {count('tokens')} tokens."
