"""One shard of a corpus traced into its partial state: the unit of work of `profile`, of a resumed run and of a Ray
actor alike."""

from __future__ import annotations

import numpy as np

from ..analysis.heads import special_keys, special_tokens_of
from ..errors import InputError
from ..hf import trace_pretrained
from ..hf.encode import encode, token_limit
from ..hf.seq2seq import ROLES, trace_seq2seq
from . import batch
from .rows import Scratch, cells_on
from .state import ProfileState, Settings
from .texts import Corpus


def run_shard(
    loaded, corpus: Corpus, s: Settings, k: int, scratch: Scratch | None = None, bound: tuple | None = None
) -> ProfileState:
    """One shard's partial state: texts k x shard_size .. (k + 1) x shard_size - 1, read `s.batch` texts of similar
    length a forward where the model allows it (attnviz.corpus.batch), else one by one. scratch: the memory its
    windows are computed in, one for every shard of a run (the large buffers then recur in one size, not freed and
    allocated again shard after shard). bound: `Choice.last()` of the shards folded before it, after which no text's
    query and key vectors are copied (attnviz.corpus.qk_sample; the shard's state is the same either way)."""
    state = ProfileState(layers_of(loaded, s), loaded.n_head, s)
    state.scratch = scratch or state.scratch
    state.qk.bound = bound
    specials = special_tokens_of(loaded.tokenizer)
    texts = []
    for i, text, why in corpus.texts(k * s.shard_size, (k + 1) * s.shard_size):
        if text is None:
            state.skip(why)
        else:
            texts.append((i, text))
    if s.batch > 1 and s.part is None and loaded.route == "seam":
        _read_batched(loaded, texts, s, state, specials)
        return state
    for i, text in texts:
        tr = trace_text(loaded, text, s)
        state.observe(tr, i, special_keys(tr, *specials))
    return state


def _read_batched(loaded, texts: list, s: Settings, state: ProfileState, specials) -> None:
    """Texts of similar length a forward (`batch.plan`), each batch read as one window; a text too long for a window
    of its own, or a batch the model cannot give as a window (`batch.capture` says None; the shard's later texts are
    then read one by one too), a text a forward through its trace, window by window."""
    limit = token_limit(loaded.max_tokens, s.max_tokens)
    encoded = [encode(loaded.tokenizer, text, None, limit) for _, text in texts]
    lengths = np.array([len(e.ids) for e in encoded])
    ids = [i for i, _ in texts]
    cells, per_cell = cells_on(loaded.device), state.n_layer * loaded.n_head
    batches = batch.plan(lengths, ids, s.batch, s.batch_tokens, cells, per_cell)
    together = True
    for group in batches:
        window = len(group) > 1 or batch.fits(1, int(lengths[group[0]]), per_cell, cells)  # a text too long: alone
        batched = batch.capture(loaded, [encoded[g] for g in group]) if together and window else None
        if batched is not None:
            state.observe_batch(batched, [ids[g] for g in group], specials)
            continue
        together = together and not window  # the model gave no window: the shard's other texts one by one too
        for g in group:
            tr = trace_text(loaded, texts[g][1], s)
            state.observe(tr, ids[g], special_keys(tr, *specials))


def check_part(loaded, s: Settings) -> None:
    """An encoder-decoder is profiled one attention (part) at a time; any other model has no parts."""
    if loaded.is_seq2seq and s.part not in ROLES:
        raise InputError(
            f"{loaded.label} is an encoder-decoder: profile one of its attentions at a time with "
            f"part={' / '.join(map(repr, ROLES))} (got {s.part!r})."
        )
    if not loaded.is_seq2seq and s.part is not None:
        raise InputError(f"{loaded.label} is not an encoder-decoder: it has no part {s.part!r} (leave part out).")


def layers_of(loaded, s: Settings) -> int:
    """The layers a profile holds: the model's, or its part's for an encoder-decoder."""
    return loaded.layers_per_role[s.part] if s.part is not None else loaded.n_layer


def trace_text(loaded, text: str, s: Settings):
    """One text's trace, or its part's: an encoder-decoder reads the text as its source and, as the dashboard does
    without a target, the decoder reads the model's greedy continuation (the encoder part is traced with the text as
    its own target instead: encoder attention never reads the target, so nothing is generated for it)."""
    if s.part is None:  # the records alone are read: the forward ends after the last attention call
        return trace_pretrained(loaded, text, max_tokens=s.max_tokens, whole_forward=False)
    target = text if s.part == "encoder" else None
    return trace_seq2seq(loaded, text, target, max_tokens=s.max_tokens).part(s.part)
