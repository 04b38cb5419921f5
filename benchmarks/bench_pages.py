"""Benchmark each page's script run (Streamlit AppTest) on the demo and a large database.

    python -m benchmarks.bench_pages [--demo data/demo.duckdb] [--synthetic 100000]
                                     [--synthetic-db benchmarks/out/synthetic_100000.duckdb]

Per database, caches are cleared once, then every page is opened in turn as a
fresh session: "first" is that first run (the first page pays for loading the
dataset, the first audit page for the bootstrap audit; later pages reuse what is
cached, as in a real session), "warm" is the median of three reruns after it.
A last line opens the explorer first, on cleared caches (a link shared to it).
Targets (warm): under 1.5 s per page on the demo, under 3 s on 100,000 prompts.
The synthetic database is generated first when missing (not timed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from benchmarks.synthetic import build_synthetic_db

APP = str(Path(__file__).resolve().parents[1] / "app.py")
PAGES: tuple[tuple[str, dict[str, str]], ...] = (
    ("overview", {}),
    ("explorer", {}),
    ("explorer", {"outcome": "below_mean", "sort": "gain"}),
    ("detail", {"raw": "1"}),
    ("judges", {}),
    ("gates", {}),
    ("findings", {}),
)
WARM_RUNS = 3


def time_page(db: str, page: str, params: dict[str, str]) -> tuple[float, float]:
    """(first, warm) seconds of one page's script run; warm = median of WARM_RUNS reruns."""
    os.environ["JUDGE_AUDIT_DB"] = db  # the app opens only databases it was started with
    at = AppTest.from_file(APP, default_timeout=1800)
    at.query_params.update({"db": db, "page": page, **params})
    start = time.perf_counter()
    at.run()
    first = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"{page} on {db}: {at.exception[0].message}")
    warm = []
    for _ in range(WARM_RUNS):
        start = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - start)
    return first, statistics.median(warm)


def bench_database(db: str, label: str, target: float) -> bool:
    """Print one table of page timings for `db`; True when every warm run meets `target`."""
    st.cache_data.clear()
    st.cache_resource.clear()
    print(f"\n{label}: {db} (warm target < {target:.1f} s)")
    print(f"{'page':<40} {'first s':>9} {'warm s':>9}")
    ok = True
    for page, params in PAGES:
        first, warm = time_page(db, page, params)
        ok &= warm < target
        name = page + (" " + " ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        print(f"{name:<40} {first:9.2f} {warm:9.2f}{'' if warm < target else '  (over target)'}", flush=True)
    st.cache_data.clear()
    st.cache_resource.clear()
    first, warm = time_page(db, "explorer", {})
    print(f"{'explorer, opened first (caches cleared)':<40} {first:9.2f} {warm:9.2f}", flush=True)
    return ok and warm < target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", default="data/demo.duckdb", help="demo database (skipped when missing)")
    parser.add_argument("--synthetic", type=int, default=100_000, help="prompts in the generated database (0 skips)")
    parser.add_argument("--synthetic-db", type=Path, default=None, help="where the generated database lives")
    args = parser.parse_args(argv)
    ok = True
    if Path(args.demo).is_file():
        ok &= bench_database(args.demo, "demo", 1.5)
    else:
        print(f"{args.demo} missing: build it with `python -m runners.demo --db {args.demo}`", file=sys.stderr)
    if args.synthetic:
        path = args.synthetic_db or Path(f"benchmarks/out/synthetic_{args.synthetic}.duckdb")
        if not path.is_file():
            build_synthetic_db(path, n_prompts=args.synthetic)
        ok &= bench_database(str(path), f"synthetic, {args.synthetic:,} prompts", 3.0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
