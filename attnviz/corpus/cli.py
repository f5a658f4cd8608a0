"""`python -m attnviz profile --model ... --corpus ... --out ...`: a head profile with progress on stderr (texts done,
tokens per second, time left). Only attnviz's own errors reach the user, as one line and exit status 2."""

from __future__ import annotations

import argparse
import sys

from ..errors import AttnvizError
from .state import Settings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser("python -m attnviz", description="attnviz from the command line.")
    sub = p.add_subparsers(dest="command", required=True)
    prof = sub.add_parser("profile", help="every head of a model across a corpus, saved as Parquet + JSON")
    prof.add_argument("--model", default="bundled", help="hub id, local folder, or 'bundled' (offline; default)")
    prof.add_argument(
        "--corpus",
        default=None,
        help="text file (a text per line), folder of .txt, .jsonl, .parquet, "
        "a saved `datasets` folder; default: the corpus that ships with attnviz",
    )
    prof.add_argument("--column", default="text", help="the text column of JSONL, Parquet or a dataset")
    prof.add_argument("--out", required=True, help="the profile's folder (a stopped run resumes from it)")
    prof.add_argument("--max-tokens", type=int, default=Settings.max_tokens, help="texts longer are cut and counted")
    prof.add_argument("--shard-size", type=int, default=Settings.shard_size)
    prof.add_argument(
        "--batch", type=int, default=Settings.batch, help="texts of similar length a forward (1: one text a forward)"
    )
    prof.add_argument("--batch-tokens", type=int, default=Settings.batch_tokens, help="padded tokens a forward at most")
    prof.add_argument("--no-distances", action="store_true", help="skip the Jensen-Shannon distances between heads")
    prof.add_argument(
        "--qk-samples",
        type=int,
        default=Settings.qk_samples,
        help="tokens whose query and key every head keeps, for its query-key space (0: none)",
    )
    prof.add_argument(
        "--distance-rows",
        type=int,
        default=Settings.distance_rows,
        help="rows per text (seeded) the head distances are averaged over; 0: every row",
    )
    prof.add_argument(
        "--part",
        choices=("encoder", "decoder", "cross"),
        help="an encoder-decoder's attention to profile (one per run)",
    )
    prof.add_argument("--device", default="auto", help="auto, cpu or cuda")
    prof.add_argument("--ray", action="store_true", help="run on Ray Data: a local runtime, or RAY_ADDRESS's cluster")
    prof.add_argument("--workers", type=int, default=2, help="Ray actors")
    return p


def progress_line(done: int, total: int, tokens: int, seconds: float) -> str:
    rate = tokens / seconds if seconds > 0 else 0.0
    left = seconds / done * (total - done) if done else float("nan")
    return f"{done:,}/{total:,} texts  {rate:,.0f} tokens/s  {left:,.0f} s left"


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from ..hf import load_model
    from .run import profile

    def progress(done, total, tokens, seconds):
        print(progress_line(done, total, tokens, seconds), file=sys.stderr, flush=True)

    try:
        model = load_model(args.model, device=args.device)
        result = profile(
            model,
            args.corpus,
            out=args.out,
            column=args.column,
            engine="ray" if args.ray else "local",
            progress=progress,
            workers=args.workers,
            max_tokens=args.max_tokens,
            shard_size=args.shard_size,
            batch=args.batch,
            batch_tokens=args.batch_tokens,
            distances=not args.no_distances,
            qk_samples=args.qk_samples,
            distance_rows=args.distance_rows,
            part=args.part,
        )
    except AttnvizError as e:
        print(f"attnviz: {e}", file=sys.stderr)
        return 2
    counts = result.provenance["counts"]
    print(
        f"{result.n_layer} layers x {result.n_head} heads over {counts['texts']:,} texts ({counts['tokens']:,} "
        f"tokens; {counts['cut']:,} cut, {counts['empty']:,} empty, {counts['undecodable']:,} undecodable "
        f"skipped) -> {args.out}"
    )
    return 0
