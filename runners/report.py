"""Write a self-contained findings report of one dataset.

    python -m runners.report --db DB --dataset NAME --out DIR [--resamples N] [--seed S] [--pool NAME]
        [--no-figures]

Writes DIR/report.html (one file: plotly.js, styles, figures and gallery images embedded; it
requests nothing when opened), DIR/report.md (the same report as Markdown, figures referenced
in figures/), DIR/figures/<name>.svg and .png for every figure (static export through kaleido
and Chromium; `--no-figures` skips it), and summary.json with every CSV table as
`runners.analyze` writes them. A dataset with selector judges gets the selection sections, one
with rating judges the rating sections, one with attribute judges the attribute sections, one
with several kinds gets each kind's (`findings.sections`).
Exit status 2 with a one-line message for an unknown database, dataset or pool, or when the
figures cannot be exported.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from audit_core import store
from audit_core.analysis import audit
from audit_core.attribute_audit import attribute_audit, load_attribute_data
from audit_core.audit_data import load_audit_data
from audit_core.browse import load_image_paths
from audit_core.errors import DatabaseFileError
from audit_core.rating_audit import consensus_pools, load_rating_data, rating_audit
from audit_core.report import source_note
from audit_core.rubric_vs_scorer import rubric_vs_scorer
from findings import document, export, images
from findings.common import library_versions
from findings.inputs import ReportInput
from findings.sections import build_sections
from runners.analyze import non_negative, write_result

def load_report(db: Path, dataset: str, resamples: int, seed: int, pool: str) -> ReportInput:
    """Read the dataset, run its audits and gather its provenance. Raises KeyError/ValueError with
    a message for an unknown dataset or pool, DatabaseFileError for a file that cannot be opened."""
    con = store.connect(db, read_only=True)
    try:
        row = store.dataset_row(con, dataset)
        if row is None:
            known = ", ".join(store.list_datasets(con)["dataset_id"]) or "none"
            raise KeyError(f"dataset {dataset!r} is not in {db} (known: {known})")
        pools = consensus_pools(con, dataset)
        rating_data = load_rating_data(con, dataset)
        attribute_data = load_attribute_data(con, dataset)
        scores = store.load_scores(con, dataset)
        if pool not in pools and (pools or (rating_data is None and attribute_data is None)):
            hint = f"; choose one with --pool NAME (pools: {', '.join(pools)})" if pools else ""
            raise KeyError(f"dataset {dataset!r} has no alignment ratings in pool {pool!r}{hint}")
        data = load_audit_data(con, dataset, pool=pool) if pools else None
        calls = store.load_calls(con, dataset)
        runs = store.load_runs(con, dataset)
        paths = load_image_paths(con, dataset)
    finally:
        con.close()
    result = audit(data, resamples=resamples, seed=seed, calls=calls) if data is not None else None
    rating = rating_audit(rating_data, resamples=resamples, seed=seed) if rating_data is not None else None
    attributes = attribute_audit(attribute_data, resamples=resamples, seed=seed) if attribute_data is not None else None
    rubric = (rubric_vs_scorer(rating_data.ratings, scores, rating_data.scale, resamples=resamples, seed=seed)
              if rating_data is not None and not rating_data.ratings.empty and not scores.empty else None)
    return ReportInput(
        dataset_id=dataset, row=row, note=source_note(row), data=data, result=result, rating_data=rating_data,
        rating=rating, attribute_data=attribute_data, attributes=attributes, rubric=rubric, runs=runs,
        image=lambda cid, path: images.candidate_uri(db, dataset, cid, path),
        image_paths=paths, pool=pool, versions=library_versions(),
    )


def write_report(report: ReportInput, out: Path, figures: bool = True) -> list[Path]:
    """Write the CSVs and summary.json (`analyze.write_result`), then report.html, report.md (in
    place of analyze's shorter one) and, with `figures`, figures/*.svg|png; returns the paths."""
    written = write_result(report.result, out, report.note, report.rating, report.attributes, report.rubric)
    sections = build_sections(report)
    (out / "report.html").write_text(document.report_html(report, sections), encoding="utf-8")
    (out / "report.md").write_text(document.report_markdown(report, sections), encoding="utf-8")
    written.append(out / "report.html")
    if figures:
        written += export.export_figures([f for s in sections for f in s.figures], out / "figures")
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runners.report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True, help="DuckDB store")
    parser.add_argument("--dataset", required=True, help="dataset id in the store")
    parser.add_argument("--out", required=True, type=Path, help="directory for the report, figures and tables")
    parser.add_argument("--resamples", type=non_negative, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed, recorded in the report (default 0)")
    parser.add_argument("--pool", default="all",
                        help="reference pool whose consensus is the selection audit's utility (default all)")
    parser.add_argument("--no-figures", action="store_true", help="skip the SVG/PNG export (no browser needed)")
    args = parser.parse_args(argv)

    db = Path(args.db)
    if not db.exists():
        print(f"error: database {db} does not exist; create it with `python -m runners.ingest ...`", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        report = load_report(db, args.dataset, args.resamples, args.seed, args.pool)
    except DatabaseFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (KeyError, ValueError) as err:
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    try:
        written = write_report(report, args.out, figures=not args.no_figures)
    except export.ExportError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"dataset {args.dataset!r}: report with {args.resamples} resamples (seed {args.seed}) in "
          f"{time.perf_counter() - started:.1f} s; wrote {len(written)} files to {args.out} (open report.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
