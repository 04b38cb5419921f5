"""Run the selection audit (and the rating audit, where there is rating data) on one dataset and write its tables.

    python -m runners.analyze --db DB --dataset NAME (--out DIR | --cache-only) [--resamples N]
        [--seed S] [--by COLUMN ...] [--pool NAME] [--engine local|ray [--parquet DIR] [--partitions N]]

Writes DIR/summary.json, DIR/report.md (the findings in Markdown) and one CSV per
table: policies, judges, positions, generators, generator_slots, flips_by_range,
flips_by_near_ties, groups, cultural, risk_coverage, gates, slices, composition and
timing; and, when the dataset has rating runs or votes on the rubric outcome,
alignment, tilt, reliability, pool_agreement and wilcoxon (with the same rows under
`alignment`, `tilt` and `reliability` in summary.json); and, when it has attribute
judges' answers, attributes, confusion and attributes_by_label (with the cells and each
judge's macro means under `attributes` in summary.json); and, when it has rating calls and
content-scorer runs, rubric_vs_scorer (each rating judge's rubric rescaled to [-1, 1] beside
each scorer: Pearson and Spearman with intervals) and rubric_vs_scorer_items. `--by COLUMN` (repeatable)
adds a slice by another prompt attribute to slices.csv; `--pool NAME` takes that
reference pool's consensus as the selection audit's utility (default `all`). Exit
status 2 with a message naming what is wrong for an unknown database, dataset, pool
or `--by` column.

Above `audit_core.stats.poisson.POISSON_ABOVE` prompts the selection audit's intervals come from the
Poisson bootstrap over partial sums (docs/large-studies.md). `--engine ray` audits such a study on a Ray
cluster without loading it here (`runners.analyze_ray`: the dataset copied into Parquet partitions of
its prompts, in a temporary folder or in `--parquet DIR` on storage every node reads, one actor a
partition, the audit made of passes whose sums are added here) and writes the same files as the
default `--engine local`; with `--cache-only` the study is loaded here, since the cache keeps its arrays.

The selection and rating audits are kept in `<db stem>_cache/` beside the database
(`audit_core.store.audit_cache`, keyed by the dataset's content, resamples, seed, pool and
slices): an unchanged dataset is not audited again, and the app opens what this
command computed. `--cache-only` fills that cache, every policy's picks included (what the app's
explorer shows for a policy) and the judge change the Judge comparison page opens with (its first
judge against the first other one, `runners.judge_change_cache`), and writes nothing else; when the cache
cannot keep them (a link or a file in its place, an unwritable folder, no usable cache key)
it says so in one line on stderr and exits 2, since what it was asked for was not done.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from audit_core import AttributeAudit, RatingAudit, Resampling, SelectionAudit
from audit_core.errors import InputError
from audit_core.rating.rubric_vs_scorer import RubricVsScorer
from audit_core.store import audit_cache
from audit_core.store.schema import DEFAULT_POOL
from audit_core.user_text import escape_markdown
from findings.output_folder import OutputFolder, check_out
from findings.summary import findings_markdown, source_note
from runners.analyze_ray import ray_audit
from runners.audits import run_audits
from runners.command import STORAGE_ERRORS, refused, storage_failed
from runners.judge_change_cache import keep_default_change
from runners.recording.ray_engine import require_ray


def non_negative(text: str) -> int:
    """Parse a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


RATING_SUMMARY_KEYS = ("alignment", "tilt", "reliability")
# After a write into --out failed: every file there is whole (each is renamed into place when complete).
UNWRITTEN = "the files in --out are each whole, from this run or an earlier one; run the command again once it can write"


def write_result(
    result: SelectionAudit | None,
    out: OutputFolder,
    note: str | None = None,
    rating: RatingAudit | None = None,
    attributes: AttributeAudit | None = None,
    rubric: RubricVsScorer | None = None,
) -> list[Path]:
    """Write summary.json, report.md (with the source `note`) and every table (the selection
    audit's, the rating audit's, then the attribute audit's) as CSV into `out`; returns the paths written.

    Any audit may be absent (None): a rating study without alignment ratings has no
    selection audit, a selection dataset without rating data no rating audit, a dataset
    without attribute judges no attribute audit.
    """
    written = []
    tables = {**(result.tables() if result is not None else {}), **(rating.tables() if rating is not None else {}),
              **(attributes.tables() if attributes is not None else {}),
              **(rubric.tables() if rubric is not None else {})}
    for name, frame in tables.items():
        written.append(out.write_text(f"{name}.csv", frame.to_csv(index=False)))
    if result is not None:
        summary = result.to_summary()
    else:
        other = rating if rating is not None else attributes
        summary = {"dataset": other.dataset_id, "resamples": other.resampling.resamples, "seed": other.resampling.seed,
                   "policies": None, "notes": ["no selection audit: the dataset has no alignment ratings"]}
    if rating is not None:
        rating_summary = rating.to_summary()
        summary["rating"] = {k: v for k, v in rating_summary.items() if k not in RATING_SUMMARY_KEYS}
        summary.update({k: rating_summary[k] for k in RATING_SUMMARY_KEYS})
    if attributes is not None:
        summary["attributes"] = attributes.to_summary()
    written.append(out.write_text("summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n"))
    if result is not None:
        text = findings_markdown(result, dataset=result.dataset_id, source_note=note)
    else:
        audits = [*(["The rating audit's tables are alignment.csv, tilt.csv, reliability.csv, pool_agreement.csv "
                     "and wilcoxon.csv."] if rating is not None else []),
                  *(["The attribute audit's tables are attributes.csv, confusion.csv and attributes_by_label.csv."]
                    if attributes is not None else [])]
        text = (f"# Findings: {escape_markdown(summary['dataset'])}\n\n"
                + (f"{escape_markdown(note, line_start=True)}\n\n" if note else "")
                + " ".join(["No selection audit: the dataset has no alignment ratings.", *audits]) + "\n")
    written.append(out.write_text("report.md", text))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runners.analyze", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True, help="DuckDB store")
    parser.add_argument("--dataset", required=True, help="dataset id in the store")
    parser.add_argument("--out", type=Path, help="directory for summary.json and the CSV tables")
    parser.add_argument("--resamples", type=non_negative, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed, recorded in summary.json (default 0)")
    parser.add_argument("--by", action="append", default=[], metavar="COLUMN",
                        help="also slice by this column of the prompts table (repeatable)")
    parser.add_argument("--pool", default=DEFAULT_POOL,
                        help="reference pool whose consensus is the selection audit's utility (default all)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="where a large study is audited: this process (default) or a Ray cluster "
                             "($RAY_ADDRESS, else this machine's, else a local instance)")
    parser.add_argument("--parquet", type=Path, metavar="DIR",
                        help="--engine ray: write the study's Parquet partitions here and keep them (a folder every "
                             "node reads; default a temporary folder, removed afterwards)")
    parser.add_argument("--partitions", type=non_negative, metavar="N",
                        help="--engine ray: partitions of the prompts, one actor each (default one per 250,000)")
    parser.add_argument("--cache-only", action="store_true",
                        help="only compute the audits into the cache beside the database (what the app opens), "
                             "writing no files")
    args = parser.parse_args(argv)
    if args.out is None and not args.cache_only:
        parser.error("give --out DIR (or --cache-only)")

    db = Path(args.db)
    if not db.exists():
        print(f"error: database {db} does not exist; create it with `python -m runners.ingest ...`", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        if not args.cache_only:
            check_out(args.out)  # before the audits, which may take minutes
        large = None
        if args.engine == "ray":
            require_ray()
            large = ray_audit(args.parquet, args.partitions or None)
        audits = run_audits(db, args.dataset, Resampling(args.resamples, args.seed), args.pool, args.by, large,
                            image_paths=False, picks=args.cache_only)
        if args.cache_only:  # and the judge change the Judge comparison page opens with
            audits.cache_problem = audits.cache_problem or keep_default_change(db, audits, args.pool)
    except (InputError, KeyError, ValueError) as err:  # not a DuckDB file, held by a writer too long,
        return refused(err)  # an unknown --by or an --out that cannot be written (OutputFolderError)
    except STORAGE_ERRORS as err:
        return storage_failed(err, "nothing was written")
    seconds = time.perf_counter() - started
    result, rating_data, rating = audits.result, audits.rating_data, audits.rating
    attribute_data, attributes, rubric = audits.attribute_data, audits.attributes, audits.rubric
    written = []
    if not args.cache_only:
        try:
            with OutputFolder.open(args.out) as out:
                written = write_result(result, out, source_note(audits.row), rating, attributes, rubric)
        except STORAGE_ERRORS as err:
            return storage_failed(err, UNWRITTEN)
    parts = []
    if result is not None:
        scorers = sorted(result.policies.loc[result.policies["kind"] == "scorer", "policy"])
        judges = ", ".join(result.judges["judge"]) or "none"
        parts.append(f"{result.slice_prompts['all']['all']} prompts, judges {judges}, "
                     f"scorers {', '.join(scorers) or 'none'}; {len(result.policies)} policies"
                     + (f", utility from pool {args.pool!r}" if args.pool != DEFAULT_POOL else ""))
    else:
        parts.append("no alignment ratings, so no selection audit")
    if rating_data is not None:
        parts.append(f"rating audit of {len(rating_data.raters)} judge × condition pairs on pools "
                     f"{', '.join(rating_data.pools)}")
    if attribute_data is not None:
        parts.append(f"attribute audit of {len(attribute_data.labelers)} judge × condition pairs, "
                     f"{len(attributes.cells)} scored cells")
    print(f"dataset {args.dataset!r}: {'; '.join(parts)}; {args.resamples} resamples (seed {args.seed}) "
          f"in {seconds:.1f} s")
    if args.cache_only and audits.cache_problem:  # all it was asked for: a failure, not a note
        print(f"error: the audits could not be kept in {audit_cache.cache_folder(db)}: {audits.cache_problem}",
              file=sys.stderr)
        return 2
    print(f"kept the audits in {audit_cache.cache_folder(db)}" if args.cache_only
          else f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
