"""Compare a candidate selector judge with a baseline on the same pools, and fail when a check does not hold.

    python -m runners.compare --db DB --dataset NAME --baseline JUDGE --candidate JUDGE --out DIR
        [--candidate-db DB2] [--candidate-dataset NAME2] [--gate SPEC ...] [--no-standard-gates]
        [--check RULE ...] [--rule NAME=VALUE ...] [--resamples N] [--seed S] [--pool NAME]

The candidate is read from DB2's dataset NAME2 when given (each defaults to --db and --dataset);
its pools must be the baseline's (same prompts, candidates and alignment ratings). Writes
DIR/compare.csv (measure, policy, baseline, candidate, difference, difference_lo, difference_hi,
n: paired differences candidate − baseline on the prompts both act on), DIR/gates.csv (gate,
judge, coverage, kept and rejected gain and kept − rejected with their intervals, verdict) and
DIR/compare.json (both tables, the prompts where the order-0 picks differ, the verdict rule and
every check's outcome), and prints a short summary.

Gates: the standard ones both judges have (orders>=k/K, scorer(S), judge(J) for a third judge)
unless --no-standard-gates, then each --gate written in gate_compose's syntax on the baseline or
the candidate (`qwen: orders>=3/3 and scorer(clip)`). --rule changes a verdict threshold
(`audit_core.selection.judge_change.verdicts.VerdictRule`). --check takes an expression over the
outputs (`audit_core.selection.judge_change.checks`, e.g. `difference_lo(gain, order0) > -0.02`);
without any, the default set applies: for every gate, the candidate's verdict is not "discards
good decisions" where the baseline's was "filters failures", and the order-0 gain difference's
lower bound stays above −0.02. docs/judge-change.md has the measures, rules and grammar.

Exit status 0 when every check holds; 1 when one fails (each failure named on one line); 2 for
bad input (an unknown database, dataset, pool or judge, pools that differ, a gate, rule or check
that does not read), with one line on stderr and nothing written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from audit_core import SelectionData, load_selection_data, store
from audit_core.errors import InputError
from audit_core.selection.judge_change import (
    CheckOutcome,
    JudgeChange,
    VerdictRule,
    compare_judges,
    default_checks,
    pair_judges,
    parse_check,
    parse_pair_gate,
)
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import DEFAULT_POOL
from findings.numbers import count, estimate, estimate_of, number, percent
from findings.output_folder import OutputFolder, check_out
from runners.analyze import UNWRITTEN, non_negative
from runners.command import STORAGE_ERRORS, refused, storage_failed


def load(db: Path, dataset: str, pool: str) -> SelectionData:
    """The dataset's selection data, read-only; KeyError (unknown dataset or pool) or DatabaseFileError."""
    if not db.exists():
        raise InputError(f"database {db} does not exist; create it with `python -m runners.ingest ...`")
    con = store.connect(db, read_only=True)
    try:
        return load_selection_data(con, dataset, pool=pool)
    finally:
        con.close()


def summary_lines(change: JudgeChange) -> list[str]:
    """What the command prints before the checks: who was compared, the order-0 gain difference, the
    prompts where the picks differ and every gate's verdict per judge."""
    base, cand = change.baseline, change.candidate
    where = (f"dataset {change.datasets['baseline']!r}" if change.datasets["baseline"] == change.datasets["candidate"]
             else f"datasets {change.datasets['baseline']!r} and {change.datasets['candidate']!r}")
    rows = change.compare.set_index(["measure", "policy"])
    gain = rows.loc[("gain", "order0")]
    split = change.disagreement
    lines = [
        f"judge change on {where}: baseline {base}, candidate {cand}, {change.prompts} prompts, "
        f"{change.resampling.resamples} resamples (seed {change.resampling.seed})",
        f"order-0 gain: {base} {number(gain['baseline'])}, {cand} {number(gain['candidate'])}, difference "
        f"{estimate(gain['difference'], gain['difference_lo'], gain['difference_hi'], signed=True)} "
        f"on {count(gain['n'])} prompts",
        f"order-0 picks differ on {split.n} of {split.both} prompts both judges picked: gain there {base} "
        f"{estimate(*split.baseline_gain)}, {cand} {estimate(*split.candidate_gain)}, difference "
        f"{estimate(*split.difference, signed=True)}",
    ]
    for row in change.gates.to_dict("records"):
        lines.append(f"gate {row['gate']}, {row['judge']}: coverage {percent(row['coverage'])}, "
                     f"kept gain {estimate_of(row, 'kept_gain')}, rejected gain {estimate_of(row, 'rejected_gain')}, "
                     f"kept - rejected {estimate_of(row, 'kept_minus_rejected', signed=True)}: {row['verdict']}")
    return lines


def failure_line(outcome: CheckOutcome) -> str:
    """"check failed: <check> (<call> = <value>; ...)": the check and what each of its calls read."""
    def shown(function: str, value: object) -> str:
        if isinstance(value, str):
            return f'"{value}"'
        return number(value, missing="undefined") if function != "n" else count(value)
    values = "; ".join(f"{call.text} = {shown(call.function, outcome.values[call.text])}"
                       for call in dict.fromkeys(outcome.check.calls))
    return f"check failed: {outcome.check.text} ({values})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runners.compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", required=True, type=Path, help="DuckDB store holding the baseline")
    parser.add_argument("--dataset", required=True, help="dataset id of the baseline")
    parser.add_argument("--baseline", required=True, help="the baseline selector judge")
    parser.add_argument("--candidate", required=True, help="the candidate selector judge")
    parser.add_argument("--candidate-db", type=Path, help="store holding the candidate (default --db)")
    parser.add_argument("--candidate-dataset", help="dataset id of the candidate (default --dataset)")
    parser.add_argument("--out", required=True, type=Path, help="folder for compare.csv, gates.csv, compare.json")
    parser.add_argument("--gate", action="append", default=[], metavar="SPEC",
                        help="a composed gate on the baseline or candidate, e.g. 'qwen: orders>=3/3' (repeatable)")
    parser.add_argument("--no-standard-gates", action="store_true", help="only the gates given with --gate")
    parser.add_argument("--check", action="append", default=[], metavar="RULE",
                        help="an expression that must hold, e.g. 'difference_lo(gain, order0) > -0.02' (repeatable)")
    parser.add_argument("--rule", action="append", default=[], metavar="NAME=VALUE",
                        help="a verdict threshold, e.g. discards_rejected_lo_above=0.01 (repeatable)")
    parser.add_argument("--resamples", type=non_negative, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed, recorded in compare.json (default 0)")
    parser.add_argument("--pool", default=DEFAULT_POOL,
                        help="reference pool whose consensus is the utility (default all)")
    args = parser.parse_args(argv)
    candidate_db = args.candidate_db or args.db
    candidate_dataset = args.candidate_dataset or args.dataset
    separate = candidate_dataset != args.dataset or candidate_db.resolve() != args.db.resolve()

    try:
        check_out(args.out)
        checks = [parse_check(text) for text in args.check]
        rule = VerdictRule().replaced(args.rule)
        data = load(args.db, args.dataset, args.pool)
        other = load(candidate_db, candidate_dataset, args.pool) if separate else None
        pair = pair_judges(data, args.baseline, args.candidate, other)
        names = [args.baseline, args.candidate, pair.baseline, pair.candidate]
        gates = [parse_pair_gate(pair, text, names) for text in args.gate]
        change = compare_judges(pair, gates, Resampling(args.resamples, args.seed), rule,
                                standard=not args.no_standard_gates)
        given = bool(checks)
        checks = checks or [parse_check(text) for text in default_checks(change.gate_labels)]
        outcomes = [change.check(c) for c in checks]
    except (InputError, KeyError, ValueError) as err:
        return refused(err)
    except STORAGE_ERRORS as err:
        return storage_failed(err, "nothing was written")

    summary = change.to_summary()
    summary["checks"] = [{"check": o.check.text, "holds": o.holds,
                          "values": {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in o.values.items()}}
                         for o in outcomes]
    summary["checks_given"] = given
    try:
        with OutputFolder.open(args.out) as out:
            for name, frame in change.tables().items():
                out.write_text(f"{name}.csv", frame.to_csv(index=False))
            out.write_text("compare.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    except STORAGE_ERRORS as err:
        return storage_failed(err, UNWRITTEN)

    for line in summary_lines(change):
        print(line)
    failed = [o for o in outcomes if not o.holds]
    for outcome in failed:
        print(failure_line(outcome))
    print(f"checks: {len(outcomes) - len(failed)} of {len(outcomes)} hold"
          f"{'' if given else ' (the default set)'}; wrote compare.csv, gates.csv and compare.json to {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
