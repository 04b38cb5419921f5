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

from audit_core import Resampling
from audit_core.errors import InputError
from audit_core.store.schema import DEFAULT_POOL
from findings import document, export, images
from findings.common import library_versions
from findings.inputs import ReportInput
from findings.output_folder import OutputFolder, check_out
from findings.sections import build_sections
from findings.summary import source_note
from runners.analyze import UNWRITTEN, non_negative, write_result
from runners.audits import run_audits
from runners.command import STORAGE_ERRORS, refused, storage_failed

FIGURES = "figures"  # the subfolder of --out holding the exported figures


def load_report(db: Path, dataset: str, resampling: Resampling, pool: str) -> ReportInput:
    """Run the dataset's audits under `resampling` (`runners.audits.run_audits`, which raises
    KeyError/ValueError with a message for an unknown dataset or pool, DatabaseFileError for a
    file that cannot be opened) and gather its provenance."""
    audits = run_audits(db, dataset, resampling, pool)
    return ReportInput(
        dataset_id=dataset, row=audits.row, note=source_note(audits.row), data=audits.data, result=audits.result,
        rating_data=audits.rating_data, rating=audits.rating, attribute_data=audits.attribute_data,
        attributes=audits.attributes, rubric=audits.rubric, runs=audits.runs,
        image=lambda cid, path: images.candidate_uri(db, dataset, cid, path),
        image_paths=audits.image_paths, pool=pool, versions=library_versions(),
    )


def write_report(report: ReportInput, out: OutputFolder, figures: bool = True) -> list[Path]:
    """Write the CSVs and summary.json (`analyze.write_result`), then report.html, report.md (in
    place of analyze's shorter one) and, with `figures`, figures/*.svg|png; returns the paths.

    Raises OutputFolderError when `figures/` is a link or not a folder, ExportError when the
    figures cannot be drawn, OSError for a file that could not be written."""
    written = write_result(report.result, out, report.note, report.rating, report.attributes, report.rubric)
    sections = build_sections(report)
    written.append(out.write_text("report.html", document.report_html(report, sections)))
    out.write_text("report.md", document.report_markdown(report, sections))
    if figures:
        written += export.export_figures([f for s in sections for f in s.figures], out, FIGURES)
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
    parser.add_argument("--pool", default=DEFAULT_POOL,
                        help="reference pool whose consensus is the selection audit's utility (default all)")
    parser.add_argument("--no-figures", action="store_true", help="skip the SVG/PNG export (no browser needed)")
    args = parser.parse_args(argv)

    db = Path(args.db)
    if not db.exists():
        print(f"error: database {db} does not exist; create it with `python -m runners.ingest ...`", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        check_out(args.out, () if args.no_figures else (FIGURES,))  # before the audits, which may take minutes
        report = load_report(db, args.dataset, Resampling(args.resamples, args.seed), args.pool)
    except (InputError, KeyError, ValueError) as err:  # a file that cannot be a store (DatabaseFileError),
        return refused(err)  # an --out that cannot be written, an unknown dataset or pool
    except STORAGE_ERRORS as err:
        return storage_failed(err, "nothing was written")
    try:
        with OutputFolder.open(args.out) as out:
            written = write_report(report, out, figures=not args.no_figures)
    except (export.ExportError, InputError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except STORAGE_ERRORS as err:
        return storage_failed(err, UNWRITTEN)
    print(f"dataset {args.dataset!r}: report with {args.resamples} resamples (seed {args.seed}) in "
          f"{time.perf_counter() - started:.1f} s; wrote {len(written)} files to {args.out} (open report.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
