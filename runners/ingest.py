"""Load pools, ratings, votes and recorded judge calls (selections, scores, ratings) into a DuckDB store.

    python -m runners.ingest judgeacts --pools FILE --run NAME=FILE [...] \\
        [--scores NAME=FILE ...] [--images DIR [--images-dir DIR]] --db DB --dataset NAME [--replace]
    python -m runners.ingest culturalframes --release DIR --db DB --dataset NAME \\
        [--images-dir DIR] [--split dev|main|all] [--per-country-dev 3] \\
        [--per-country-main 30] [--seed S] [--replace]
    python -m runners.ingest table --pools FILE [--votes FILE] [--decisions NAME=FILE ...] \\
        [--scores NAME=FILE ...] [--ratings NAME=FILE ...] [--rating-outcome NAME] \\
        [--outcome NAME=LO:HI ...] [--labels FILE] [--labeler NAME=FILE ...] [--taxonomy FILE] \\
        --db DB --dataset NAME [--replace]

The table contract (columns and rules of pools, votes, decisions, scores,
ratings, gold labels and attribute judges' answers) is docs/table-contract.md; `table` reads
each file with DuckDB and checks it in SQL (`audit_core.ingest.tables`), so a table of millions
of rows is never read row by row in Python. Each ingest is one transaction: on any bad
input (or an input that cannot be read) the error names the file, line and
field, the exit status is 2 and the database is left as it was; a database file
the failed ingest would have created is not left behind. Running out of memory
(Python's or DuckDB's) ends the same way, in one line. Re-ingesting the same
files changes nothing.

`judgeacts --images DIR` attaches images by candidate id: from image files in DIR
named `<candidate id>.png|.jpg|.jpeg|.webp`, or, when DIR is a CulturalFrames
release, from its `data/*.parquet` shards, whose images are written to
`--images-dir` (default: `images/DATASET` beside the database) once the database
write has succeeded. Every attached image is decoded first; a candidate with no
image in DIR keeps none. Thumbnails (256 px on the long edge) are made beside the
database, in `<db stem>_thumbs/DATASET/`, for the app's grids.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb

from audit_core import user_text
from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, load_taxonomy
from audit_core.errors import InputError
from audit_core.ingest import culturalframes, judgeacts, staged_writes, tables, values
from audit_core.ingest.pools import PoolSet, utility_pools, write_dataset
from audit_core.ingest.staged import StagedPools
from audit_core.ingest.staging import Workspace
from audit_core.store import thumbnails
from audit_core.store.schema import DEFAULT_POOL
from runners.command import STORAGE_ERRORS, storage_failure

OUT_OF_MEMORY = ("out of memory: the ingest needed more memory than this process may use (its limit, "
                 "`ulimit -v`, or the machine's); free memory or raise the limit and run again")


def named_path(text: str) -> tuple[str, str]:
    """Parse NAME=FILE (a blank NAME is refused by `check_names`, naming the flag)."""
    name, sep, path = text.partition("=")
    if not sep or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {user_text.shown(text)}")
    return name, path


def outcome_scale(text: str) -> tuple[str, tuple[float, float]]:
    """Parse NAME=LO:HI, an outcome column of the user's own with its scale."""
    try:
        return tables.declared_scale(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def count(text: str) -> int:
    """Parse a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {user_text.shown(text)}")
    return int(text)


def check_names(args: argparse.Namespace) -> None:
    """InputError naming the flag of the first name given that is blank (`user_text.blank`): --dataset,
    the NAME of every NAME=FILE and --rating-outcome; checked before any file is read."""
    given = {"--dataset": args.dataset, "--rating-outcome": getattr(args, "rating_outcome", None)}
    for flag in ("--run", "--decisions", "--scores", "--ratings", "--labeler"):
        given[flag] = [name for name, _ in getattr(args, flag[2:], None) or ()]
    values.names(given)


def _summary(pools: PoolSet) -> list[str]:
    per_pool = pools.votes.groupby(["outcome", "pool"]).size()
    return _summary_lines(pools.dataset_id, len(pools.prompts), len(pools.candidates),
                          int(pools.candidates["image_path"].notna().sum()),
                          [(o, p, n) for (o, p), n in per_pool.items()], utility_pools(pools),
                          bool(len(pools.votes) or len(pools.ratings)), bool(len(pools.gold_labels)))


def _staged_summary(pools: StagedPools) -> list[str]:
    return _summary_lines(pools.dataset_id, pools.count("prompts"), pools.count("candidates"),
                          pools.count("candidates", "image_path IS NOT NULL"), pools.vote_counts(),
                          pools.utility_pools(), bool(pools.count("votes") or pools.count("ratings")),
                          bool(pools.count("gold_labels")))


def _summary_lines(dataset: str, prompts: int, candidates: int, images: int, votes: list[tuple[str, str, int]],
                   utility: list[str], rated: bool, gold: bool) -> list[str]:
    """What an ingest read: counts, votes per outcome and pool, and which audits the dataset allows."""
    lines = [f"dataset {dataset!r}: {prompts} prompts, {candidates} candidates ({images} with images on disk)"]
    if votes:
        lines.append("votes: " + ", ".join(f"{n} on {o} in pool {p!r}" for o, p, n in votes))
    if not utility:
        uses = [*(["the rating audit uses the votes and consensus"] if rated else []),
                *(["the attribute audit uses the gold labels"] if gold else [])]
        lines.append("selection audit: no alignment ratings, so no utility to audit picks with"
                     + "".join(f"; {use}" for use in uses))
    elif DEFAULT_POOL not in utility:
        lines.append(f"selection audit: alignment in pools {', '.join(utility)} but not in {DEFAULT_POOL!r}; "
                     "choose one with `runners.analyze --pool NAME`")
    return lines


def ingest_judgeacts(args: argparse.Namespace) -> list[str]:
    """Read every file (and decode every image to attach) first, then write pools, runs and
    scores in one transaction; then publish the images from shards and make thumbnails."""
    check_names(args)
    pools = judgeacts.read_pools(args.pools, args.dataset)
    runs = [judgeacts.read_run(path, name) for name, path in args.run]
    scores = [judgeacts.read_scores(path, name) for name, path in args.scores]
    attached: list[str] = []
    if args.images is not None and judgeacts.image_shards(args.images):
        with culturalframes.ImageStage(_images_dir(args)) as stage:
            pools, staged, line = judgeacts.attach_images(pools, args.images, stage)
            report = write_dataset(args.db, pools, runs, scores, replace=args.replace)
            attached = [line, f"images: {stage.publish(staged.values())} written to {stage.images_dir}"]
    else:
        if args.images is not None:
            pools, _, line = judgeacts.attach_images(pools, args.images, None)
            attached = [line]
        report = write_dataset(args.db, pools, runs, scores, replace=args.replace)
    return [*_summary(pools), *attached, *report, *_thumbnail_lines(args.db, pools)]


def _images_dir(args: argparse.Namespace) -> Path:
    """Where images from parquet shards are written: --images-dir, else images/DATASET beside the database."""
    if args.images_dir is not None:
        return Path(args.images_dir)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.dataset):
        raise InputError(f"dataset name {user_text.shown(args.dataset)} cannot name the images folder; pass --images-dir")
    return Path(args.db).parent / "images" / args.dataset


def _thumbnail_lines(db: str, pools: PoolSet) -> list[str]:
    """Make the missing or outdated thumbnails of the dataset's images; a line saying how it went (none without images)."""
    with_image = pools.candidates.dropna(subset=["image_path"])
    if with_image.empty:
        return []
    counts = thumbnails.make_thumbnails(db, pools.dataset_id, dict(zip(with_image["candidate_id"], with_image["image_path"])))
    line = (f"thumbnails: {counts['made']} made, {counts['current']} already current, "
            f"in {thumbnails.thumbnail_folder(db, pools.dataset_id)}")
    if counts["failed"]:
        line += f"; {counts['failed']} could not be made (the app makes them when it first shows the image)"
    return [line]


def ingest_table(args: argparse.Namespace) -> list[str]:
    """Read the pools and votes tables, the gold labels and every decisions/scores/ratings/labeler table
    (each into a staging database), then check them together and write them in one transaction."""
    check_names(args)
    declared = dict(args.outcome)
    scale = tables.rating_scale(args.rating_outcome, declared)
    taxonomy = load_taxonomy(args.taxonomy)
    with contextlib.ExitStack() as staged:
        workspace = Workspace()
        staged.callback(workspace.close)
        pools = tables.read_pools_table(args.pools, args.dataset, declared, votes=args.votes, labels=args.labels,
                                        taxonomy=taxonomy, workspace=workspace)
        staged.callback(pools.close)
        readers = [
            *(lambda p=path, n=name: tables.read_decisions_table(p, n) for name, path in args.decisions),
            *(lambda p=path, n=name: tables.read_scores_table(p, n, workspace) for name, path in args.scores),
            *(lambda p=path, n=name: tables.read_ratings_table(p, n, args.rating_outcome, scale, workspace)
              for name, path in args.ratings),
            *(lambda p=path, n=name: tables.read_labeler_table(p, n, taxonomy, workspace) for name, path in args.labeler),
        ]
        runs = []
        for read in readers:
            runs.append(read())
            staged.callback(runs[-1].close)
            runs[-1].stage.join(workspace)  # decisions are read into a DuckDB instance of their own: close it now
        summary = _staged_summary(pools)
        if args.labels:
            summary.append(f"gold labels: {pools.count('gold_labels')} on "
                           f"{pools.count('(SELECT DISTINCT candidate_id FROM gold_labels)')} images, "
                           f"taxonomy {taxonomy.name} {taxonomy.version}")
        return [*summary, *staged_writes.write_staged_dataset(args.db, pools, runs, replace=args.replace)]


def ingest_culturalframes(args: argparse.Namespace) -> list[str]:
    """Read and stage the release, write it in one transaction, then publish the images."""
    check_names(args)
    if args.images_dir is None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.dataset):
        raise InputError(f"dataset name {user_text.shown(args.dataset)} cannot name the images folder; "
                         "pass --images-dir")
    images_dir = args.images_dir or f"data/images/{args.dataset}"
    with culturalframes.ImageStage(images_dir) as stage:
        pools, audit = culturalframes.read_release(
            args.release,
            args.dataset,
            stage,
            split=args.split,
            per_country_dev=args.per_country_dev,
            per_country_main=args.per_country_main,
            seed=args.seed,
        )
        report = write_dataset(args.db, pools, replace=args.replace)
        moved = stage.publish(pools.candidates["image_path"])
    return [*audit, *_summary(pools), *report, f"images: {moved} written to {stage.images_dir}"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.ingest", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="source", required=True)

    ja = sub.add_parser("judgeacts", help="JudgeActs artifact: derived split + recorded runs")
    ja.add_argument("--pools", required=True, help="data/derived/{split}.jsonl")
    ja.add_argument("--run", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="recorded judge calls (runs/*.jsonl); repeatable")
    ja.add_argument("--scores", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="content-scorer output (e.g. results/main/clip_scores.json); repeatable")
    ja.add_argument("--images", metavar="DIR",
                    help="attach images by candidate id: files DIR/<candidate id>.png|.jpg|.jpeg|.webp, "
                         "or a CulturalFrames release's DIR/data/*.parquet shards")
    ja.add_argument("--images-dir", metavar="DIR",
                    help="where images from parquet shards are written (default: images/DATASET beside the database)")
    _common(ja)
    ja.set_defaults(handler=ingest_judgeacts)

    cf = sub.add_parser("culturalframes", help="CulturalFrames release: annotations JSON + parquet image shards")
    cf.add_argument("--release", required=True, help=f"folder with {culturalframes.ANNOTATIONS_FILE} and data/*.parquet")
    cf.add_argument("--images-dir", help="where decoded images are stored (default: data/images/DATASET)")
    cf.add_argument("--split", choices=culturalframes.SPLITS, default="all",
                    help="which frozen split to ingest (default: all kept pools)")
    cf.add_argument("--per-country-dev", type=count, default=3, help="dev pools per country (default 3)")
    cf.add_argument("--per-country-main", type=count, default=30, help="main pools per country (default 30)")
    cf.add_argument("--seed", type=int, default=0, help="seed of the split hash (default 0)")
    _common(cf)
    cf.set_defaults(handler=ingest_culturalframes)

    tb = sub.add_parser("table", help="any CSV/Parquet/JSONL tables (docs/table-contract.md)")
    tb.add_argument("--pools", required=True, help="pools and ratings, one row per candidate (and pool)")
    tb.add_argument("--votes", metavar="FILE",
                    help="individual annotator ratings (candidate_id, outcome, pool, annotator, value); "
                         "an item's consensus defaults to the mean of its pool's votes")
    tb.add_argument("--decisions", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="a judge's calls, one row per call; repeatable")
    tb.add_argument("--scores", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="a content scorer's per-candidate scores; repeatable")
    tb.add_argument("--ratings", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="a rating judge's ratings, one row per (candidate, condition); repeatable")
    tb.add_argument("--rating-outcome", default="rubric", metavar="NAME",
                    help="the outcome the --ratings judges rate; its scale is theirs (default rubric, 1-5)")
    tb.add_argument("--outcome", action="append", type=outcome_scale, default=[], metavar="NAME=LO:HI",
                    help="a rating column (or votes outcome) of your own and its scale, e.g. helpfulness=1:5; "
                         "repeatable")
    tb.add_argument("--labels", metavar="FILE",
                    help="gold labels of attribute judges (candidate_id, attribute, label), labels from --taxonomy")
    tb.add_argument("--labeler", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="an attribute judge's answers (candidate_id, attribute, label, optional rationale, "
                         "condition); repeatable")
    tb.add_argument("--taxonomy", default=DEFAULT_TAXONOMY, metavar="FILE",
                    help="the attribute taxonomy (JSON) the labels and answers belong to "
                         "(default: runners/taxonomies/default_v1.json)")
    _common(tb)
    tb.set_defaults(handler=ingest_table)
    return parser


def _common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--db", required=True, help="DuckDB file (created if absent)")
    sub.add_argument("--dataset", required=True, help="dataset name in the store")
    sub.add_argument("--replace", action="store_true",
                     help="overwrite a dataset or judge that exists with different content")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], list[str]] = args.handler
    try:
        lines = handler(args)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        print("nothing was written: the database is unchanged", file=sys.stderr)
        return 2
    except STORAGE_ERRORS as err:  # a full disk; a file that went away or became unreadable after it was read
        print(f"error: {storage_failure(err)}", file=sys.stderr)
        print("nothing was written: the database is unchanged", file=sys.stderr)
        return 2
    except (MemoryError, duckdb.OutOfMemoryException):  # the transaction was rolled back on the way out
        print(f"error: {OUT_OF_MEMORY}", file=sys.stderr)
        print("nothing was written: the database is unchanged", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
