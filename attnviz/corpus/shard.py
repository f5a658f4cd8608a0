"""One shard of a corpus traced into its partial state: the unit of work of `profile`, of a resumed run and of a Ray
actor alike."""

from __future__ import annotations

from ..analysis.heads import special_keys, special_tokens_of
from ..hf import trace_pretrained
from .state import ProfileState, Settings
from .texts import Corpus


def run_shard(loaded, corpus: Corpus, s: Settings, k: int) -> ProfileState:
    """One shard's partial state: texts k x shard_size .. (k + 1) x shard_size - 1, traced one by one."""
    state = ProfileState(loaded.n_layer, loaded.n_head, s)
    specials = special_tokens_of(loaded.tokenizer)
    for i, text, why in corpus.texts(k * s.shard_size, (k + 1) * s.shard_size):
        if text is None:
            state.skip(why)
            continue
        tr = trace_pretrained(loaded, text, max_tokens=s.max_tokens)
        state.observe(tr, i, special_keys(tr, *specials))
    return state
