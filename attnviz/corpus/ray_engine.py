"""The same shards on Ray Data: one actor per worker loads the model once (a GPU each when the cluster has them), maps
shard numbers to their partial states, and the states come back to be folded in shard order by `profile`.

`ray.init` joins the cluster `RAY_ADDRESS` names, or starts a local runtime with `workers` CPUs; a runtime started here
is shut down at the end. Ray is an optional extra (`pip install attnviz[ray]`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from ..errors import InputError, first_line
from .shard import layers_of, run_shard
from .state import ProfileState, Settings
from .texts import Corpus


class ShardWorker:
    """A Ray Data actor: the model loaded once, then batches of shard numbers -> their states as .npz bytes."""

    def __init__(self, model: str, dtype: str, corpus: Corpus, settings: Settings):
        import torch

        from ..hf import load_model

        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.loaded = load_model(model, device=device, dtype=dtype)
        self.corpus, self.settings = corpus, settings

    def __call__(self, batch: dict) -> dict:
        shards = [int(k) for k in batch["shard"]]
        states = [run_shard(self.loaded, self.corpus, self.settings, k).to_bytes() for k in shards]
        return {"shard": shards, "state": states}


def run_on_ray(loaded, corpus: Corpus, settings: Settings, todo: list[int], workers: int) -> dict:
    """{shard: ProfileState} for the shards in `todo`, computed by `workers` actors."""
    try:
        import ray
    except ImportError:
        raise InputError("engine='ray' needs Ray: pip install 'attnviz[ray]'.") from None
    if not todo:
        return {}
    if not loaded.name or loaded.name.startswith("<"):
        raise InputError("engine='ray' loads the model in every worker: give it by name or folder, not an object.")
    started = not ray.is_initialized()
    if started:
        start_runtime(ray, workers)
    try:
        gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        out = ray.data.from_items([{"shard": k} for k in todo]).map_batches(
            ShardWorker,
            fn_constructor_kwargs=dict(model=loaded.name, dtype=loaded.dtype, corpus=corpus, settings=settings),
            batch_size=1,
            concurrency=max(1, min(workers, len(todo))),
            num_cpus=1,
            num_gpus=gpus,
        )
        rows = out.take_all()
    finally:
        if started:
            ray.shutdown()
    return {
        int(r["shard"]): ProfileState.from_bytes(r["state"], layers_of(loaded, settings), loaded.n_head, settings)
        for r in rows
    }


def start_runtime(ray, workers: int, tries: int = 2) -> None:
    """Join RAY_ADDRESS's cluster or start a local runtime. A local raylet gives up when its own agent is slow to
    start (seen on a machine loaded far past its cores), so a failed start is tried once more before it is refused."""
    address = os.environ.get("RAY_ADDRESS")
    for attempt in range(tries):
        before = descendants()
        try:
            ray.init(address=address, **({} if address else _local(workers)))
            return
        except Exception as e:  # Ray's start-up errors have no common type
            ray.shutdown()
            end_processes(descendants() - before)  # a node that never finished starting is not shut down
            if attempt == tries - 1:
                where = f"the Ray cluster at {address}" if address else "a local Ray runtime"
                raise InputError(f"Could not start {where}: {first_line(e)}") from None


def _local(workers: int) -> dict:
    """A local runtime's settings: `workers` CPUs, no dashboard, and workers that import this attnviz (a checkout
    works as an installed package does) with the driver's offline settings."""
    here = str(Path(__file__).resolve().parents[2])
    env = {k: os.environ[k] for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") if k in os.environ}
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    return {"num_cpus": workers, "include_dashboard": False, "runtime_env": {"env_vars": {**env, "PYTHONPATH": path}}}


def descendants() -> set[int]:
    """The ids of every live process below this one, read from /proc (an empty set where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [os.getpid()]
    while todo:
        below = children.get(todo.pop(), [])
        found.update(below)
        todo.extend(below)
    return found


def end_processes(pids: set[int], grace_s: float = 5.0) -> None:
    """SIGTERM `pids`, then SIGKILL those still running after `grace_s`; those that were this process's children
    are reaped."""
    left = set(pids)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(OSError):  # already gone
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while (left := left & descendants()) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not left:
            break
    for pid in pids:
        with contextlib.suppress(OSError):  # not our child, or reaped
            os.waitpid(pid, os.WNOHANG)
