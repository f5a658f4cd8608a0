"""Every head across a corpus: `profile(model, corpus)` -> HeadProfile, saved as Parquet + JSON, reopened with
`open_profile`. See attnviz.corpus.run for shards and resumption, attnviz.corpus.ray_engine for Ray Data."""

from .run import profile
from .state import Settings
from .store import HeadProfile, open_profile
from .texts import Corpus, Limits, open_corpus

__all__ = ["Corpus", "HeadProfile", "Limits", "Settings", "open_corpus", "open_profile", "profile"]
