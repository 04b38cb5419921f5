"""Rating campaigns: define what is rated, follow it, export it, and let remote annotators in (docs/campaigns.md).

    python -m runners.campaign create --db DB --dataset NAME --campaign C --task {alignment,rubric,labels} \\
        --pool POOL --sample PLAN --size N --overlap R [--seed S] [--instructions FILE] [--taxonomy FILE] \\
        [--annotators A,B,...] [--new-pool]
    python -m runners.campaign status --db DB --dataset NAME --campaign C [--resamples B] [--seed S]
    python -m runners.campaign export --db DB --dataset NAME --campaign C --out FILE.csv|FILE.parquet
    python -m runners.campaign invite --db DB --dataset NAME --campaign C --annotator A [--host H] [--port P]
    python -m runners.campaign revoke --db DB --dataset NAME --campaign C --annotator A

Plans (--sample): uniform, stratified:ATTR, gate:NAME[:kept=F], picks-differ:JUDGE_A,JUDGE_B
(`audit_core.campaigns.plans`). Bad input — an unknown dataset, pool, gate, judge or attribute,
a size above the population, an overlap above the annotators named, a blank name, a campaign
name already taken — is refused in one line naming the flag, exit status 2, and the database is
left as it was (each write is one transaction). `invite` prints the secret once: the store keeps
only its SHA-256.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn, TypeVar
from urllib.parse import urlencode

import pandas as pd

from audit_core import campaigns, store
from audit_core.attributes.taxonomy import load_taxonomy
from audit_core.campaigns.records import TASKS
from audit_core.errors import InputError
from audit_core.stats.resampling import Resampling
from audit_core.user_text import shown, visible
from findings import numbers
from runners.command import STORAGE_ERRORS, storage_failed

EXPORT_SUFFIXES = (".csv", ".parquet")
T = TypeVar("T")
ANNOTATE_PATH = "/annotate"  # the Annotate page's address in the app (coordinated with it in the campaign API)


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose refusals are one line, `error: …` naming the flag, exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def whole(text: str) -> int:
    """A whole number written with ASCII digits."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {shown(text)}")
    return int(text)


def name_list(text: str) -> tuple[str, ...]:
    """Comma-separated names (each checked for blankness by the campaign)."""
    return tuple(part.strip() for part in text.split(","))


def _existing_db(path: str) -> Path:
    db = Path(path)
    if not db.is_file():
        raise InputError("no such database; create it with `python -m runners.ingest ...` first", file=db,
                         field="--db")
    return db


def _read(flag: str, read: Callable[[str], T], path: str | None) -> T | None:
    """`read(path)` when a path is given, an InputError it raises naming `flag` too."""
    if path is None:
        return None
    try:
        return read(path)
    except InputError as err:
        raise err if err.field else InputError(str(err), field=flag) from None


def create(args: argparse.Namespace) -> list[str]:
    instructions = _read("--instructions", campaigns.read_instructions, args.instructions)
    taxonomy = _read("--taxonomy", load_taxonomy, args.taxonomy)
    with store.writing(_existing_db(args.db)) as con:
        campaign = campaigns.create_campaign(
            con, args.dataset, args.campaign, args.task, args.pool, args.sample, args.size, args.overlap,
            seed=args.seed, annotators=args.annotators, instructions=instructions, taxonomy=taxonomy,
            new_pool=args.new_pool)
        record = campaigns.draw_record(con, campaign)
    who = ", ".join(campaign.annotators) if campaign.annotators else "any name"
    lines = [f"campaign {campaign.name!r} on dataset {campaign.dataset!r}: {campaign.task}, pool {campaign.pool!r}, "
             f"{campaign.size} items by plan {campaign.plan!r} (seed {campaign.seed}), {campaign.overlap} "
             f"annotator(s) per item, annotators: {who}",
             f"instructions sha256 {campaign.instructions_sha256}"]
    lines += [f"  stratum {visible(s)!r}: {v['quota']} of {v['population']}" for s, v in record["strata"].items()]
    return lines


def status(args: argparse.Namespace) -> list[str]:
    con = store.connect(_existing_db(args.db), read_only=True)
    try:
        campaign = campaigns.load_campaign(con, args.dataset, args.campaign)
        progress = campaigns.progress(con, campaign)
        alpha = campaigns.reliability(con, campaign, Resampling(args.resamples, args.seed)).iloc[0]
        agreement = campaigns.annotator_agreement(con, campaign).set_index("annotator")
        seconds = campaigns.median_seconds(con, campaign).set_index("annotator")["median_seconds"]
    finally:
        con.close()
    level = "nominal" if campaign.task == "labels" else "interval"
    lines = [f"campaign {campaign.name!r} ({campaign.task}, pool {campaign.pool!r}, {campaign.size} items × "
             f"{campaign.overlap}, plan {campaign.plan!r}, seed {campaign.seed})",
             f"Krippendorff's alpha ({level}) in pool {campaign.pool!r}: "
             f"{numbers.estimate(alpha['alpha'], alpha['alpha_lo'], alpha['alpha_hi'], missing=numbers.UNDEFINED)} "
             f"over {numbers.count(alpha['items_with_overlap'])} items rated by at least two annotators "
             f"({args.resamples} resamples, seed {args.seed})",
             "annotator\tpool\trated\tskipped\ttarget\tagreement_with_rest\tn\tmedian_seconds"]
    for row in progress.itertuples(index=False):
        agree = agreement.loc[row.annotator] if row.annotator in agreement.index else None
        lines.append("\t".join([
            visible(row.annotator), visible(row.pool), str(row.rated), str(row.skipped), str(row.target),
            numbers.number(None if agree is None else agree["agreement_with_rest"]),
            str(0 if agree is None else int(agree["n"])),
            numbers.number(seconds.get(row.annotator))]))
    return lines


def export(args: argparse.Namespace) -> list[str]:
    out = Path(args.out)
    if out.suffix.lower() not in EXPORT_SUFFIXES:
        raise InputError(f"expected a file ending in {' or '.join(EXPORT_SUFFIXES)}", file=out, field="--out")
    con = store.connect(_existing_db(args.db), read_only=True)
    try:
        campaign = campaigns.load_campaign(con, args.dataset, args.campaign)
        table = campaigns.export_table(con, campaign)
    finally:
        con.close()
    _write_table(table, out)
    what = "gold labels (--labels)" if campaign.task == "labels" else "votes (--votes)"
    return [f"wrote {len(table)} {what} of campaign {campaign.name!r} to {out}"]


def _write_table(table: pd.DataFrame, out: Path) -> None:
    """Write the table beside its final name, then rename it there: a reader never sees half a file."""
    partial = out.with_name(f".{out.name}.partial")
    if out.suffix.lower() == ".csv":
        table.to_csv(partial, index=False)
    else:
        table.to_parquet(partial, index=False)
    partial.replace(out)


def invite(args: argparse.Namespace) -> list[str]:
    with store.writing(_existing_db(args.db)) as con:
        campaign = campaigns.load_campaign(con, args.dataset, args.campaign)
        token = campaigns.invite(con, campaign, args.annotator)
    link = f"http://{args.host}:{args.port}{ANNOTATE_PATH}?{urlencode({'campaign': campaign.name, 'token': token})}"
    return [f"token for {args.annotator!r} on campaign {campaign.name!r} (shown once; only its hash is stored):",
            token, f"link: {link}"]


def revoke(args: argparse.Namespace) -> list[str]:
    with store.writing(_existing_db(args.db)) as con:
        campaign = campaigns.load_campaign(con, args.dataset, args.campaign)
        count = campaigns.revoke(con, campaign, args.annotator)
    return [f"revoked {count} token(s) of {args.annotator!r} on campaign {campaign.name!r}"]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m runners.campaign", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    made = sub.add_parser("create", help="draw the items of a new campaign and store it")
    _common(made)
    made.add_argument("--task", required=True, choices=TASKS, help="what the annotators answer")
    made.add_argument("--pool", required=True, help="the reference pool the votes belong to")
    made.add_argument("--new-pool", action="store_true", help="allow a pool the dataset does not have yet")
    made.add_argument("--sample", required=True, metavar="PLAN",
                      help="uniform, stratified:ATTR, gate:NAME[:kept=F] or picks-differ:JUDGE_A,JUDGE_B")
    made.add_argument("--size", required=True, type=whole, help="items to draw")
    made.add_argument("--overlap", required=True, type=whole, help="annotators per item")
    made.add_argument("--seed", type=whole, default=0, help="seed of the draw (default 0)")
    made.add_argument("--instructions", metavar="FILE", help="instruction text (default: the task's own)")
    made.add_argument("--taxonomy", metavar="FILE", help="labels: the label sets (default: the dataset's taxonomy)")
    made.add_argument("--annotators", type=name_list, default=(), metavar="A,B,...",
                      help="named annotators sharing the items (default: open to any name)")
    made.set_defaults(handler=create)

    state = sub.add_parser("status", help="progress, reliability and time per item")
    _common(state)
    state.add_argument("--resamples", type=whole, default=10_000, help="bootstrap resamples (default 10000)")
    state.add_argument("--seed", type=whole, default=0, help="bootstrap seed (default 0)")
    state.set_defaults(handler=status)

    out = sub.add_parser("export", help="the campaign's votes or labels as a table-contract file")
    _common(out)
    out.add_argument("--out", required=True, metavar="FILE", help="FILE.csv or FILE.parquet")
    out.set_defaults(handler=export)

    asked = sub.add_parser("invite", help="a secret link for one annotator (printed once)")
    _common(asked)
    asked.add_argument("--annotator", required=True)
    asked.add_argument("--host", default="localhost", help="host in the printed link (default localhost)")
    asked.add_argument("--port", type=whole, default=8501, help="port in the printed link (default 8501)")
    asked.set_defaults(handler=invite)

    gone = sub.add_parser("revoke", help="revoke every token of one annotator")
    _common(gone)
    gone.add_argument("--annotator", required=True)
    gone.set_defaults(handler=revoke)
    return parser


def _common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--db", required=True, help="DuckDB store")
    sub.add_argument("--dataset", required=True, help="dataset name in the store")
    sub.add_argument("--campaign", required=True, help="campaign name, unique within the dataset")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lines = args.handler(args)
    except (InputError, campaigns.CampaignError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except STORAGE_ERRORS as err:
        return storage_failed(err, "nothing was written: the database is unchanged")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
