"""Load pools, ratings and recorded judge decisions into a DuckDB store.

    python -m runners.ingest judgeacts --pools FILE --run NAME=FILE [...] \\
        [--scores NAME=FILE ...] --db DB --dataset NAME [--replace]
    python -m runners.ingest culturalframes --release DIR --db DB --dataset NAME \\
        [--images-dir DIR] [--split dev|main|all] [--per-country-dev 3] \\
        [--per-country-main 30] [--seed S] [--replace]
    python -m runners.ingest table --pools FILE [--decisions NAME=FILE ...] \\
        [--scores NAME=FILE ...] --db DB --dataset NAME [--replace]

Each ingest is one transaction: on any bad input the error names the file, line
and field, the exit status is 2 and the database is left as it was.
Re-ingesting the same files changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from audit_core.errors import InputError
from audit_core.ingest import culturalframes, judgeacts, tables
from audit_core.ingest.pools import PoolSet, write_dataset


def named_path(text: str) -> tuple[str, str]:
    """Parse NAME=FILE."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {text!r}")
    return name, path


def count(text: str) -> int:
    """Parse a non-negative integer."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def _summary(pools: PoolSet) -> str:
    n_images = int(pools.candidates["image_path"].notna().sum())
    return (
        f"dataset {pools.dataset_id!r}: {len(pools.prompts)} prompts, {len(pools.candidates)} candidates "
        f"({n_images} with images on disk)"
    )


def ingest_judgeacts(args: argparse.Namespace) -> list[str]:
    """Read every file first, then write pools, runs and scores in one transaction."""
    pools = judgeacts.read_pools(args.pools, args.dataset)
    runs = [judgeacts.read_run(path, name) for name, path in args.run]
    scores = [judgeacts.read_scores(path, name) for name, path in args.scores]
    report = write_dataset(args.db, pools, runs, scores, replace=args.replace)
    return [_summary(pools), *report]


def ingest_table(args: argparse.Namespace) -> list[str]:
    """Read the pools table and every decisions/scores table, then write them in one transaction."""
    pools = tables.read_pools_table(args.pools, args.dataset)
    runs = [tables.read_decisions_table(path, name) for name, path in args.decisions]
    scores = [tables.read_scores_table(path, name) for name, path in args.scores]
    report = write_dataset(args.db, pools, runs, scores, replace=args.replace)
    return [_summary(pools), *report]


def ingest_culturalframes(args: argparse.Namespace) -> list[str]:
    """Read and stage the release, write it in one transaction, then publish the images."""
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
    return [*audit, _summary(pools), *report, f"images: {moved} written to {stage.images_dir}"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.ingest", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="source", required=True)

    ja = sub.add_parser("judgeacts", help="JudgeActs artifact: derived split + recorded runs")
    ja.add_argument("--pools", required=True, help="data/derived/{split}.jsonl")
    ja.add_argument("--run", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="recorded judge calls (runs/*.jsonl); repeatable")
    ja.add_argument("--scores", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="content-scorer output (e.g. results/main/clip_scores.json); repeatable")
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
    tb.add_argument("--decisions", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="a judge's calls, one row per call; repeatable")
    tb.add_argument("--scores", action="append", type=named_path, default=[], metavar="NAME=FILE",
                    help="a content scorer's per-candidate scores; repeatable")
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
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
