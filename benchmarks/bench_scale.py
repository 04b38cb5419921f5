"""Generate, ingest and audit datasets of a million prompts and more: wall time and peak memory of each step.

    python -m benchmarks.bench_scale --prompts 1000000 10000000 --out /tmp/judge-audit-scale \\
        [--formats parquet csv jsonl] [--steps generate ingest analyze] [--resamples 1000] \\
        [--engine local|ray [--partitions N]] [--memory-limit 20GiB] [--keep]

For each size N, in OUT/N/ (OUT must lie outside the repository):

- generate: `python -m benchmarks.synthetic --tables` writes the dataset (3 judges x 3 orders and a
  CLIP-like scorer, in chunks of 100,000 prompts) in every format asked;
- ingest: `python -m runners.ingest table` reads it, once per format, each into a store of its own
  (the table size limit, $JUDGE_AUDIT_MAX_TABLE_BYTES, raised to the largest of these files);
- analyze: `python -m runners.analyze --resamples R --engine E` audits the first format's store (the
  others are deleted once measured, unless --keep), with the audit cache beside it removed first: every
  run audits; its tables go to OUT/N/analysis (OUT/N/analysis-ray with `--engine ray`, which without
  $RAY_ADDRESS starts a local Ray instance of its own).

Each step runs as a child process; its wall time and peak resident memory (the child's own ru_maxrss,
from wait4) are printed in a table, and beside them the peak of the proportional memory (PSS, shared
pages split among the processes that map them) of the child and every process it started, read once a
second: for `--engine ray` the driver, Ray's own processes and its workers with the object store's
shared pages counted once. A watchdog reads the child's resident memory ten times a second,
and the proportional memory of it and its descendants once a second, and stops them all (SIGKILL) once
either passes --memory-limit, which the table reports as such, rather than leaving the machine to the
kernel's OOM killer (a Ray engine's workers hold most of a study). The data are deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audit_core.store import audit_cache
from benchmarks.synthetic import FORMATS, JUDGE_STYLES

REPO = Path(__file__).resolve().parents[1]
STEPS = ("generate", "ingest", "analyze")
POLL_SECONDS = 0.1
TREE_POLL_SECONDS = 1.0
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def byte_count(text: str) -> int:
    """Parse a size such as 20GiB, 512MiB, 4G or 1000000 (bytes)."""
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not found:
        raise argparse.ArgumentTypeError(f"expected a size like 20GiB, got {text!r}")
    return int(float(found.group(1)) * _UNITS[found.group(2)])


@dataclass
class Step:
    """What one child process did: its wall time, peak resident memory, the peak proportional memory of
    it and the processes it started, and how it ended."""

    prompts: int
    step: str
    form: str
    seconds: float
    peak_bytes: int
    tree_bytes: int
    result: str


def _kib_field(path: str, field: str) -> int:
    """Bytes of the "<field> <n> kB" line of the /proc file at `path`, 0 once its process is gone."""
    try:
        with open(path) as lines:
            for line in lines:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def resident_bytes(pid: int) -> int:
    """The resident memory of process `pid` now (VmRSS), 0 once it is gone."""
    return _kib_field(f"/proc/{pid}/status", "VmRSS:")


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (/proc/<pid>/task/<tid>/children), parents first."""
    found, at = [pid], 0
    while at < len(found):
        try:
            tasks = os.listdir(f"/proc/{found[at]}/task")
        except OSError:
            tasks = []
        for task in tasks:
            try:
                with open(f"/proc/{found[at]}/task/{task}/children") as children:
                    found += [int(child) for child in children.read().split()]
            except OSError:
                pass
        at += 1
    return found


def proportional_bytes(pid: int) -> int:
    """The proportional set size of process `pid` now (Pss of /proc/<pid>/smaps_rollup), 0 once it is gone."""
    return _kib_field(f"/proc/{pid}/smaps_rollup", "Pss:")


def run_step(argv: list[str], limit: int, env: dict[str, str], log: Path) -> tuple[float, int, int, str]:
    """Run `argv` as a child (output to `log`); (wall seconds, peak resident bytes of the child, peak
    proportional bytes of the child and its descendants, result)."""
    started = time.perf_counter()
    with open(log, "w") as out:
        child = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    exceeded = threading.Event()
    finished = threading.Event()
    tree_peak = [0]

    def watch() -> None:
        last_tree = 0.0
        while not finished.wait(POLL_SECONDS):
            tree = 0
            if time.perf_counter() - last_tree >= TREE_POLL_SECONDS:
                last_tree = time.perf_counter()
                tree = sum(proportional_bytes(pid) for pid in descendants(child.pid))
                tree_peak[0] = max(tree_peak[0], tree)
            if resident_bytes(child.pid) > limit or tree > limit:
                exceeded.set()
                for pid in reversed(descendants(child.pid)):  # the processes it started, then the child
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                return

    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    _, status, usage = os.wait4(child.pid, 0)
    finished.set()
    watchdog.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    peak = usage.ru_maxrss * 1024  # Linux reports KiB
    if exceeded.is_set():
        return seconds, peak, tree_peak[0], f"stopped: memory passed {limit / (1 << 30):.1f} GiB"
    if child.returncode != 0:
        return seconds, peak, tree_peak[0], f"failed (exit {child.returncode})"
    return seconds, peak, tree_peak[0], "ok"


def dataset_files(folder: Path, form: str) -> dict[str, Path]:
    """The generated tables of `form` in `folder`, by role ('pools', 'decisions <judge>', 'scores clip')."""
    files = {"pools": folder / f"pools.{form}", "scores clip": folder / f"scores-clip.{form}"}
    files.update({f"decisions {style[0]}": folder / f"decisions-{style[0]}.{form}" for style in JUDGE_STYLES})
    return files


def ingest_argv(folder: Path, form: str, db: Path, dataset: str) -> list[str]:
    files = dataset_files(folder, form)
    argv = [sys.executable, "-m", "runners.ingest", "table", "--pools", str(files["pools"])]
    for role, path in files.items():
        if role.startswith("decisions "):
            argv += ["--decisions", f"{role.split()[1]}={path}"]
    return [*argv, "--scores", f"clip={files['scores clip']}", "--db", str(db), "--dataset", dataset]


def bench_size(n: int, args: argparse.Namespace, env: dict[str, str]) -> list[Step]:
    """The steps asked for one dataset size, in order; later steps are skipped once one fails."""
    folder = args.out / str(n)
    folder.mkdir(parents=True, exist_ok=True)
    dataset = f"synthetic-{n}"
    audited = folder / f"store-{args.formats[0]}.duckdb"  # the first format's store is the one analyzed
    done: list[Step] = []
    plan = []
    if "generate" in args.steps:
        plan.append(("generate", "+".join(args.formats), [sys.executable, "-m", "benchmarks.synthetic", "--tables",
                                                          str(folder), "--prompts", str(n), "--formats", *args.formats]))
    if "ingest" in args.steps:
        for form in args.formats:
            db = folder / f"store-{form}.duckdb"
            plan.append(("ingest", form, ingest_argv(folder, form, db, dataset)))
    if "analyze" in args.steps:
        engine = "" if args.engine == "local" else f"-{args.engine}"  # the local engine keeps the names it had
        plan.append(("analyze", f"{args.formats[0]}{engine}", [
            sys.executable, "-m", "runners.analyze", "--db", str(audited), "--dataset", dataset,
            "--out", str(folder / f"analysis{engine}"), "--resamples", str(args.resamples),
            "--engine", args.engine, *(["--partitions", str(args.partitions)] if args.partitions else [])]))
    for step, form, argv in plan:
        log = folder / f"{step}-{form}.log"
        if step == "ingest":
            db = folder / f"store-{form}.duckdb"
            for stale in (db, db.with_name(db.name + ".wal")):
                stale.unlink(missing_ok=True)
            largest = max(path.stat().st_size for path in dataset_files(folder, form).values())
            env = dict(env, JUDGE_AUDIT_MAX_TABLE_BYTES=str(largest))
        if step == "analyze":  # audit afresh, not from the cache an earlier run kept beside the store
            shutil.rmtree(audit_cache.cache_folder(audited), ignore_errors=True)
        seconds, peak, tree, result = run_step(argv, args.memory_limit, env, log)
        if step == "ingest" and form != args.formats[0] and not args.keep:  # only the first is audited: free the disk
            for written in (db, db.with_name(db.name + ".wal")):
                written.unlink(missing_ok=True)
        done.append(Step(n, step, form, seconds, peak, tree, result))
        print(_row(done[-1]), flush=True)
        if result != "ok":
            print("".join(f"    | {line}" for line in log.read_text(errors="replace").splitlines(True)[-8:]), flush=True)
            break
    return done


HEADER = f"{'prompts':>10}  {'step':<9} {'format':<20} {'wall s':>9} {'peak GiB':>9} {'tree GiB':>9}  result"


def _row(step: Step) -> str:
    return (f"{step.prompts:>10,}  {step.step:<9} {step.form:<20} {step.seconds:>9.1f} "
            f"{step.peak_bytes / (1 << 30):>9.2f} {step.tree_bytes / (1 << 30):>9.2f}  {step.result}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, nargs="+", required=True, help="dataset sizes, in prompts")
    parser.add_argument("--out", type=Path, required=True, help="working folder, outside the repository")
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples of the audit")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="the audit's engine (runners.analyze --engine; default local)")
    parser.add_argument("--partitions", type=int, metavar="N",
                        help="--engine ray: partitions of the study, one Ray actor each (default: analyze's own)")
    parser.add_argument("--memory-limit", type=byte_count, default=20 << 30,
                        help="stop a step whose resident memory passes this (default 20GiB)")
    parser.add_argument("--keep", action="store_true", help="leave the generated data and stores in OUT")
    args = parser.parse_args(argv)
    args.out = args.out.resolve()
    if args.out.is_relative_to(REPO):
        parser.error(f"--out {args.out} is inside the repository; choose a folder outside it")
    env = dict(os.environ)
    print(HEADER, flush=True)
    steps: list[Step] = []
    try:
        for n in args.prompts:
            steps += bench_size(n, args, env)
    finally:
        if not args.keep:
            for n in args.prompts:
                shutil.rmtree(args.out / str(n), ignore_errors=True)
    print("\n" + HEADER)
    print("\n".join(_row(step) for step in steps))
    return 0 if all(step.result == "ok" for step in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
