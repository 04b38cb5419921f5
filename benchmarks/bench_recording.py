"""Recording overhead per judge call: everything the recorder does except the model.

    python benchmarks/bench_recording.py [--prompts 400] [--orders 3] [--concurrency 1] [--repeat 3]
                                         [--mode both|held|file]

A no-op backend answers every request instantly with a valid ranking, so the
wall time of `run_selector` divided by the number of calls is the per-call
cost of planning, request keys, thread hand-off, parsing and committing to
DuckDB (target: under 2 ms). Dataset planning and image checks are included.
Two modes: `held`, one connection open throughout (the Python API), and
`file`, the command line's path, which attaches the file per write and leaves
it unlocked for readers in between (`runners.recording.sessions.DatabaseFile`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from audit_core import store
from runners.recording.sessions import DatabaseFile
from runners.run_judge import run_selector
from runners.selection.protocol import JudgeRequest
from tests.support.pools import write_tiny_dataset


class NoOpBackend:
    """Answers instantly with the canonical ranking of the labels shown."""

    def generate(self, request: JudgeRequest) -> str:
        return json.dumps({"choice": request.labels[0], "ranking": list(request.labels)})

    def model_revision(self) -> str:
        return "noop"

def measure(target: object, args: argparse.Namespace, prefix: str) -> tuple[list[float], float, int, int]:
    """Per-call ms of `args.repeat` fresh judges, seconds of a resume with nothing left, calls and planned."""
    per_call_ms = []
    for i in range(args.repeat):
        start = time.perf_counter()
        summary = run_selector(target, dataset="bench", judge=f"{prefix}-{i}", backend=NoOpBackend(),
                               backend_name="noop", model="noop", orders=args.orders,
                               concurrency=args.concurrency, progress=False)
        per_call_ms.append(1000 * (time.perf_counter() - start) / summary.recorded)
    resume_start = time.perf_counter()
    run_selector(target, dataset="bench", judge=f"{prefix}-0", backend=NoOpBackend(), backend_name="noop",
                 model="noop", orders=args.orders, concurrency=args.concurrency, progress=False)
    return per_call_ms, time.perf_counter() - resume_start, summary.recorded, summary.planned

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=400)
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="fresh judges recorded; the median is reported")
    parser.add_argument("--mode", choices=("both", "held", "file"), default="both")
    args = parser.parse_args()
    modes = ("held", "file") if args.mode == "both" else (args.mode,)
    medians = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        write_tiny_dataset(db, Path(tmp) / "images", dataset="bench", n_prompts=args.prompts)
        for mode in modes:
            if mode == "held":
                con = store.connect(db)
                try:
                    per_call_ms, resume, recorded, planned = measure(con, args, mode)
                finally:
                    con.close()
            else:
                per_call_ms, resume, recorded, planned = measure(DatabaseFile(db), args, mode)
            median = statistics.median(per_call_ms)
            medians.append(median)
            runs = ", ".join(f"{v:.3f}" for v in per_call_ms)
            print(f"{mode}: {recorded} calls per run, concurrency {args.concurrency}: median {median:.3f} ms "
                  f"per call (runs: {runs}; target < 2 ms)")
            print(f"{mode}: resume with everything recorded: {resume:.2f} s for {planned} planned calls")
    return 0 if max(medians) < 2.0 else 1

if __name__ == "__main__":
    sys.exit(main())
