"""Benchmark each page's script run (Streamlit AppTest) on the demo and a large database.

    python -m benchmarks.bench_pages [--demo data/demo.duckdb] [--synthetic 100000]
                                     [--synthetic-db benchmarks/out/synthetic_100000.duckdb] [--no-fill]

Per database, the audit cache beside it is filled first (`runners.analyze --cache-only` with the
resample count the app opens it with; not timed, its seconds printed), then the app's in-memory
caches are cleared once and every page is opened in turn as a fresh session: "first" is that first
run, drawing the whole page (as once the browser has painted its first pass, `app_ui.painted`); the
first page pays for reading the dataset and the audit from the cache, the first explorer with a
policy or pool detail for every policy's picks, later pages reuse what is cached, as in a real
session. "warm" is the median of three reruns after it. A last line opens the explorer first,
on cleared caches (a link shared to it). Targets (warm): on the demo under 1.5 s per page; on a
large database under 3 s for the overview, judge comparison, gate lab and findings, under 1 s for
the explorer and pool detail (filters, sorting, paging). The process's peak resident memory is
printed per database. The synthetic database is generated first when missing (not timed); put big
ones outside the repository.

`--queries-only` times, on the synthetic database alone and without Streamlit, what the explorer
and pool detail compute per run once the dataset is loaded: each browsing filter of PAGES as the
DuckDB queries the pages run (count, one page, one pool's place) beside the pandas filter over every
prompt they replace, plus the one-off loads (the dataset's arrays, the judge's outcomes, the Arrow
table the queries read, a policy's picks on it).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import streamlit as st
from streamlit.testing.v1 import AppTest

from app_ui import context, painted
from audit_core import store
from audit_core.selection import browse
from audit_core.selection.data import load_selection_data
from audit_core.selection.outcomes import prompt_outcomes
from audit_core.selection.policies import policy_picks
from benchmarks.synthetic import build_synthetic_db

APP = str(Path(__file__).resolve().parents[1] / "app.py")
FOCUS = "slot_a"  # the synthetic data's first judge (the app's default focus judge); the demo's is another
PAGES: tuple[tuple[str, dict[str, str]], ...] = (  # those needing every policy's picks last
    ("overview", {}),
    ("explorer", {}),
    ("explorer", {"outcome": "below_mean", "sort": "gain"}),
    ("explorer", {"country": "Japan", "generator": "flux", "q": "festival", "sort": "prompt_id", "desc": "0"}),
    ("explorer", {"sort": "rating_range", "per": "50", "pg": "9"}),
    ("judges", {}),
    ("gates", {}),
    ("findings", {}),
    ("explorer", {"policy": "{judge} majority", "outcome": "below_mean"}),
    ("explorer", {"policy": "{judge} borda", "outcome": "best", "sort": "gain"}),
    ("detail", {"raw": "1"}),
    ("detail", {"outcome": "flip", "sort": "gain"}),
)
FAST_PAGES = ("explorer", "detail")  # the browsing pages: their own target
WARM_RUNS = 3
T = TypeVar("T")


def time_page(db: str, page: str, params: dict[str, str]) -> tuple[float, float]:
    """(first, warm) seconds of one page's script run; warm = median of WARM_RUNS reruns."""
    os.environ["JUDGE_AUDIT_DB"] = db  # the app opens only databases it was started with
    at = AppTest.from_file(APP, default_timeout=1800)
    at.query_params.update({"db": db, "page": page, **params})
    at.session_state[painted.STATE] = {page}  # as once the browser has painted the first pass: the whole page
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


def fill_cache(db: str) -> float:
    """Seconds `runners.analyze --cache-only` takes to keep the default dataset's audits beside `db`, with
    the resample count the app opens it with."""
    con = store.connect(db, read_only=True)
    try:
        datasets = store.list_datasets(con)
    finally:
        con.close()
    dataset = context.default_dataset(datasets)
    prompts = int(datasets.set_index("dataset_id").loc[dataset, "prompts"])
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "runners.analyze", "--db", db, "--dataset", dataset, "--cache-only",
                    "--resamples", str(context.default_resample_count(prompts))], check=True)
    return time.perf_counter() - start


def peak_memory_gib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)


def bench_database(db: str, label: str, target: float, fast_target: float, focus: str, fill: bool) -> bool:
    """Print one table of page timings for `db`; True when every warm run meets its target (`fast_target`
    for the explorer and pool detail); `focus` is the judge named in the pages' policy links."""
    if fill:
        print(f"\n{label}: audit cache filled by runners.analyze --cache-only in {fill_cache(db):.1f} s", flush=True)
    st.cache_data.clear()
    st.cache_resource.clear()
    print(f"\n{label}: {db} (warm targets < {target:.1f} s; explorer and detail < {fast_target:.1f} s)")
    print(f"{'page':<72} {'first s':>9} {'warm s':>9}")
    ok = True
    for page, template in PAGES:
        params = {key: value.format(judge=focus) for key, value in template.items()}
        first, warm = time_page(db, page, params)
        goal = fast_target if page in FAST_PAGES else target
        ok &= warm < goal
        name = page + (" " + " ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        print(f"{name:<72} {first:9.2f} {warm:9.2f}{'' if warm < goal else '  (over target)'}", flush=True)
    st.cache_data.clear()
    st.cache_resource.clear()
    first, warm = time_page(db, "explorer", {})
    print(f"{'explorer, opened first (caches cleared)':<72} {first:9.2f} {warm:9.2f}", flush=True)
    print(f"peak resident memory of this process so far: {peak_memory_gib():.1f} GiB", flush=True)
    return ok and warm < fast_target


def _seconds(run: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    value = run()
    return value, time.perf_counter() - start


def bench_queries(db: str, focus: str) -> None:
    """Print the one-off loads and, per browsing filter of PAGES, the seconds of the explorer's DuckDB
    queries and of the pandas filter they replace (see the module docstring)."""
    con = store.connect(db, read_only=True)
    try:
        dataset = context.default_dataset(store.list_datasets(con))
        data, load = _seconds(lambda: load_selection_data(con, dataset))
    finally:
        con.close()
    outcomes, outcome_s = _seconds(lambda: prompt_outcomes(data, focus))
    table, table_s = _seconds(lambda: browse.pool_table(data, outcomes))
    specs, specs_s = _seconds(lambda: policy_picks(data))
    majority, policy_s = _seconds(lambda: browse.with_policy(table, data, specs[f"{focus} majority"]))
    order0 = browse.with_policy(table, data, specs[focus])
    print(f"\n{data.n_prompts:,} prompts: dataset loaded in {load:.1f} s, {focus}'s outcomes {outcome_s:.2f} s, "
          f"Arrow table {table_s:.2f} s, every non-debiased policy's picks {specs_s:.2f} s, "
          f"one policy on the table {policy_s:.2f} s; peak memory {peak_memory_gib():.1f} GiB")
    print(f"{'filter':<72} {'count+page s':>12} {'place s':>8} {'pandas s':>9}")
    for page, template in PAGES:
        if page not in FAST_PAGES:
            continue
        params = {key: value.format(judge=focus) for key, value in template.items()}
        policy = params.get("policy", "")
        flt = browse.PoolFilter(
            countries=tuple(params.get("country", "").split()), generators=tuple(params.get("generator", "").split()),
            text=params.get("q", ""), outcomes=tuple(params.get("outcome", "").split()),
            sort=params.get("sort", "regret"), descending=params.get("desc", "1") == "1", policy=policy)
        on = majority if policy.endswith("majority") else order0
        if policy and not policy.endswith("majority"):
            continue  # the debiased picks need the calls: timed through the pages
        start = (int(params.get("pg", 1)) - 1) * int(params.get("per", 10))
        (n, shown), query_s = _seconds(lambda: (browse.count_pools(on, flt), browse.pool_page(on, flt, start, start + 10)))
        place_s = _seconds(lambda: browse.pool_place(on, flt, shown["prompt_id"].iat[0] if n else ""))[1]
        frame = outcomes if not policy else on.to_pandas()
        pandas_s = _seconds(lambda: browse.filter_pools(data, frame, flt).iloc[start:start + 10])[1]
        name = page + (" " + " ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        print(f"{name:<72} {query_s:12.3f} {place_s:8.3f} {pandas_s:9.3f}", flush=True)
    print(f"peak resident memory of this process: {peak_memory_gib():.1f} GiB", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", default="data/demo.duckdb", help="demo database (skipped when missing)")
    parser.add_argument("--synthetic", type=int, default=100_000, help="prompts in the generated database (0 skips)")
    parser.add_argument("--synthetic-db", type=Path, default=None, help="where the generated database lives")
    parser.add_argument("--no-fill", dest="fill", action="store_false",
                        help="do not fill the audit cache first (the first page then runs the audit)")
    parser.add_argument("--queries-only", action="store_true",
                        help="time the explorer's queries on the synthetic database without Streamlit")
    args = parser.parse_args(argv)
    ok = True
    if args.queries_only:
        path = args.synthetic_db or Path(f"benchmarks/out/synthetic_{args.synthetic}.duckdb")
        if not path.is_file():
            build_synthetic_db(path, n_prompts=args.synthetic)
        bench_queries(str(path), FOCUS)
        return 0
    if Path(args.demo).is_file():
        ok &= bench_database(args.demo, "demo", 1.5, 1.5, "slot-a-judge", args.fill)
    else:
        print(f"{args.demo} missing: build it with `python -m runners.demo --db {args.demo}`", file=sys.stderr)
    if args.synthetic:
        path = args.synthetic_db or Path(f"benchmarks/out/synthetic_{args.synthetic}.duckdb")
        if not path.is_file():
            build_synthetic_db(path, n_prompts=args.synthetic)
        ok &= bench_database(str(path), f"synthetic, {args.synthetic:,} prompts", 3.0, 1.0, FOCUS, args.fill)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
