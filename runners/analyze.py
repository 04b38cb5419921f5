"""Run the selection audit on one dataset and write its tables.

    python -m runners.analyze --db DB --dataset NAME --out DIR [--resamples N] [--seed S]

Writes DIR/summary.json, DIR/report.md (the findings in Markdown) and one CSV per
table (policies, judges, positions, generators, flips_by_range, groups, cultural,
risk_coverage, gates). Exit status 2 with a message naming what is wrong for an
unknown database or dataset.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from audit_core import store
from audit_core.analysis import AuditResult, audit
from audit_core.audit_data import load_audit_data
from audit_core.report import findings_markdown, source_note


def non_negative(text: str) -> int:
    """Parse a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def write_result(result: AuditResult, out: Path, note: str | None = None) -> list[Path]:
    """Write summary.json, report.md (with the source `note`) and every table as CSV into
    `out`; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in result.tables().items():
        path = out / f"{name}.csv"
        frame.to_csv(path, index=False)
        written.append(path)
    path = out / "summary.json"
    path.write_text(json.dumps(result.to_summary(), indent=2, ensure_ascii=False) + "\n")
    written.append(path)
    path = out / "report.md"
    path.write_text(findings_markdown(result, dataset=result.dataset_id, source_note=note), encoding="utf-8")
    written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.analyze", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="DuckDB store")
    parser.add_argument("--dataset", required=True, help="dataset id in the store")
    parser.add_argument("--out", required=True, type=Path, help="directory for summary.json and the CSV tables")
    parser.add_argument("--resamples", type=non_negative, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed, recorded in summary.json (default 0)")
    args = parser.parse_args(argv)

    db = Path(args.db)
    if not db.is_file():
        print(f"error: database {db} does not exist; create it with `python -m runners.ingest ...`", file=sys.stderr)
        return 2
    con = store.connect(db, read_only=True)
    try:
        row = store.dataset_row(con, args.dataset)
        if row is None:
            known = ", ".join(store.list_datasets(con)["dataset_id"]) or "none"
            print(f"error: dataset {args.dataset!r} is not in {db} (known: {known})", file=sys.stderr)
            return 2
        data = load_audit_data(con, args.dataset)
    except KeyError as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    finally:
        con.close()
    started = time.perf_counter()
    result = audit(data, resamples=args.resamples, seed=args.seed)
    seconds = time.perf_counter() - started
    written = write_result(result, args.out, source_note(row))
    print(
        f"dataset {args.dataset!r}: {data.n_prompts} prompts, judges {', '.join(data.judges) or 'none'}, "
        f"scorers {', '.join(data.scorers) or 'none'}; {len(result.policies)} policies, "
        f"{args.resamples} resamples (seed {args.seed}) in {seconds:.1f} s"
    )
    print(f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
