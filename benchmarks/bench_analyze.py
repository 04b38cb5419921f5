"""Benchmark the full selection audit: time and peak memory.

    python -m benchmarks.bench_analyze --db data/ja.duckdb --dataset main [--resamples 10000]
    python -m benchmarks.bench_analyze --synthetic 100000 [--db /tmp/synthetic.duckdb]

With --synthetic N, a generated dataset of N prompts (3 judges x 3 orders and a
scorer) is written first by a separate process (not timed, not in the memory
figure; reused when the file already holds it). Prints load and audit seconds and
the peak resident memory of this process (ru_maxrss) after the audit.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from audit_core import Resampling, audit_selection, load_selection_data, store


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _has_dataset(db: Path, dataset: str) -> bool:
    if not db.is_file():
        return False
    con = store.connect(db, read_only=True)
    try:
        return store.dataset_row(con, dataset) is not None
    finally:
        con.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_analyze", description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--dataset", default=None)
    parser.add_argument("--synthetic", type=int, default=0, help="generate a dataset of this many prompts first")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1, help="time the audit this many times (best is printed)")
    args = parser.parse_args(argv)

    if args.synthetic:
        db = args.db or Path(f"/tmp/judge_audit_synthetic_{args.synthetic}.duckdb")
        dataset = f"synthetic-{args.synthetic}"
        if not _has_dataset(db, dataset):
            subprocess.run(
                [sys.executable, "-m", "benchmarks.synthetic", "--db", str(db), "--prompts", str(args.synthetic),
                 "--seed", str(args.seed)],
                check=True,
            )
    else:
        if args.db is None or args.dataset is None:
            parser.error("give --db and --dataset, or --synthetic N")
        db, dataset = args.db, args.dataset
    base_rss = peak_rss_mb()

    con = store.connect(db, read_only=True)
    started = time.perf_counter()
    data = load_selection_data(con, dataset)
    load_seconds = time.perf_counter() - started
    con.close()
    times = []
    for _ in range(max(1, args.repeat)):
        started = time.perf_counter()
        result = audit_selection(data, Resampling(args.resamples, args.seed))
        times.append(time.perf_counter() - started)
    print(
        f"dataset {dataset!r}: {data.n_prompts} prompts, judges {', '.join(data.judges)}, "
        f"{len(result.policies)} policies, {args.resamples} resamples"
    )
    print(f"load  {load_seconds:6.2f} s")
    print(f"audit {min(times):6.2f} s (best of {len(times)}: {', '.join(f'{t:.2f}' for t in times)})")
    print(f"peak RSS {peak_rss_mb():8.0f} MB (before loading: {base_rss:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
