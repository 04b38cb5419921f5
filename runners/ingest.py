"""Load pools, ratings and recorded judge decisions into a DuckDB store.

    python -m runners.ingest judgeacts --pools FILE --run NAME=FILE [...] \
        [--scores NAME=FILE ...] --db DB --dataset NAME [--replace]

Each ingest is one transaction: on any bad input the error names the file, line
and field, the exit status is 2 and the database is left as it was.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from audit_core import store
from audit_core.errors import InputError
from audit_core.ingest import judgeacts
from audit_core.ingest.pools import write_imported_run, write_imported_scores, write_pools


def named_path(text: str) -> tuple[str, str]:
    """Parse NAME=FILE."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {text!r}")
    return name, path


def ingest_judgeacts(args: argparse.Namespace) -> list[str]:
    """Read every file first, then write pools, runs and scores in one transaction."""
    pools = judgeacts.read_pools(args.pools, args.dataset)
    runs = [judgeacts.read_run(path, name) for name, path in args.run]
    scores = [judgeacts.read_scores(path, name) for name, path in args.scores]
    con = store.connect(args.db)
    try:
        with store.transaction(con):
            report = [f"pools: {write_pools(con, pools, replace=args.replace)}"]
            for run in runs:
                outcome = write_imported_run(con, args.dataset, run, replace=args.replace)
                counts = run.calls["status"].value_counts().to_dict()
                report.append(f"judge {run.judge}: {outcome}, {len(run.calls)} calls {counts}")
            for imported in scores:
                outcome = write_imported_scores(con, args.dataset, imported, replace=args.replace)
                report.append(f"scorer {imported.scorer}: {outcome}, {len(imported.scores)} scores")
    finally:
        con.close()
    n_images = int(pools.candidates["image_path"].notna().sum())
    return [
        f"dataset {args.dataset!r}: {len(pools.prompts)} prompts, {len(pools.candidates)} candidates "
        f"({n_images} with images on disk)",
        *report,
    ]


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
