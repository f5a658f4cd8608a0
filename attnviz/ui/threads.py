"""How many threads the dashboard's numerical work runs on: one for a short text, settings.torch_threads() for a
long one, for torch and numpy's BLAS alike.

A server's cores are shared: with its own event loop, with other sessions, and with the browser when the app runs on
a laptop. Idle worker threads wait for the next parallel step by spinning (torch's OpenMP threads for a while, the
OpenBLAS threads under numpy for ~0.1 s), so every small parallel step of a run holds a core the others needed.
Measured on two cores with the browser beside the server (docs/benchmarks.md, session 22), a new sentence's run
ended at ~0.2 s on one thread against ~0.36-0.4 s with two for torch and numpy alike, 0.3 s with numpy's BLAS alone on
one. Alone on a machine, two threads are faster only where there is work to share: the bundled model traced 12
tokens in 11 ms against 9 ms on two threads, 200 tokens in 64 against 36 ms, 512 in 175 against 110 ms; with the
browser beside it, one thread still won at 110 tokens and tied at 500.

torch's count belongs to the Python thread that sets it once torch has run there (OpenMP's own setting), so another
session's run keeps its own; a thread that has not run torch yet starts from the last count set anywhere. numpy's
BLAS count is the process's: the latest run sets it for every session's numpy.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import torch
from threadpoolctl import ThreadpoolController

from .. import settings

ONE_THREAD_BYTES = 500  # work on a text at most this long (UTF-8 bytes, so at most ~500 tokens) runs on one thread
SPECIAL = 8  # room for the special tokens a tokenizer adds


def light(*texts: str | None, tokens: int = 0, most: int | None = None) -> bool:
    """Whether work on `texts` plus `tokens` more (padding, generated tokens) stays within ONE_THREAD_BYTES: a token
    covers at least one byte of its text, and a text is cut at `most` tokens (the token limit)."""
    size = sum(len(t.encode()) for t in texts if t) + SPECIAL
    if most is not None:
        size = min(size, most + SPECIAL)
    return size + tokens <= ONE_THREAD_BYTES


def extent(text: str, opts: dict) -> tuple[tuple[str, ...], int, int | None]:
    """What a trace of `text` with trace options `opts` reads: its texts (the text, a second sentence, an
    encoder-decoder's target), the tokens it adds past them (padding, generated tokens) and its token limit."""
    texts = (text, *(str(opts.get(k) or "") for k in ("pair", "target")))
    return texts, int(opts.get("pad_to") or 0) + int(opts.get("generate") or 0), opts.get("max_tokens")


def count(is_light: bool) -> int:
    """One thread for light work, settings.torch_threads() for the rest."""
    return 1 if is_light else settings.torch_threads()


def for_run(text: str, pair: str | None, most: int | None) -> None:
    """As a page asks for the trace of the sidebar's text (ui.get_trace): torch's and numpy's BLAS threads for the
    run's work on it (a long text's products are large: Rollout multiplies [token, token] matrices)."""
    n = count(light(text, pair, most=most))
    torch.set_num_threads(n)
    _blas_threads(n)


def _blas_threads(n: int) -> None:
    """numpy's BLAS on `n` threads: the whole process's setting, so changed only when it changes (from a light run to
    a long one), never under another session's products more than it must. The libraries' thread pools are found
    once (a few ms); each limit then takes microseconds."""
    if getattr(_blas_threads, "now", None) == n:
        return
    if not hasattr(_blas_threads, "pools"):
        _blas_threads.pools = ThreadpoolController()
    _blas_threads.pools.limit(limits=n, user_api="blas")
    _blas_threads.now = n


@contextmanager
def using(n: int) -> Iterator[None]:
    """torch on `n` threads for the block, the run's count again afterwards."""
    had = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(had)


def for_trace(text: str, opts: dict) -> AbstractContextManager[None]:
    """torch's threads for one trace of `text` with trace options `opts` (its padding and generated tokens count)."""
    texts, tokens, most = extent(text, opts)
    return using(count(light(*texts, tokens=tokens, most=most)))


def for_long_work() -> AbstractContextManager[None]:
    """torch's threads for work on many texts (a corpus profile built on a page): settings.torch_threads()."""
    return using(settings.torch_threads())  # a profile's statistics are torch's: numpy's BLAS has no part in them
