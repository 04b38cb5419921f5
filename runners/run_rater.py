"""Record a rating judge on a dataset: every item (candidate image) alone, under each condition.

    python -m runners.run_rater --db DB --dataset NAME --judge NAME \
        --backend {simulated,hf,openai} --model ID [--condition NAME ...] \
        [--conditions FILE] [--instruction FILE] [--limit N] [--concurrency N] [--batch-size N] [--replace] \
        [--max-new-tokens 16] [--max-edge 448] [--structured]

The judge sees the prompt and one image with a versioned rubric instruction
(default runners/instructions/rubric_1to5_v1.txt: 1-5 anchors, abstention
`unspecified`) under each named condition of a conditions file (default
runners/conditions/default_v1.json; condition `default` unless --condition
is given). For `simulated`, --model names a profile of
runners/judges/simulated_raters.json. Calls are committed as they finish and
the database is released between writes; run the same command again to
resume. Bad input exits with status 2, a database or judge name held by
another process with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import pandas as pd

from audit_core.errors import InputError
from audit_core.ingest import values
from runners.command import run_job
from runners.rating.parsing import Scale
from runners.rating.protocol import (
    DEFAULT_CONDITION,
    DEFAULT_CONDITIONS,
    DEFAULT_INSTRUCTION,
    RatingBackend,
    load_rubric,
    select_conditions,
)
from runners.rating.recorder import load_rating_scope, plan_ratings, record_rater
from runners.recording import backend_args
from runners.recording.recorder import RunSummary
from runners.recording.sessions import DatabaseFile

run_rater = record_rater  # the public name of the rating path, for the demo and other callers


def make_backend(args: argparse.Namespace, consensus: pd.DataFrame, scale: Scale) -> RatingBackend:
    """Build the backend the flags ask for; hf and openai are the selectors' backends, unchanged.

    A simulated rater is given the dataset's pool consensus (candidate_id,
    pool, consensus), which must lie on the rubric's scale.
    """
    if args.backend != "simulated":
        return backend_args.model_backend(args)
    from runners.backends.simulated_rater import simulated_rater

    if consensus.empty:
        raise InputError(f"the simulated rater needs pool consensus (ratings or votes) for the rubric's outcome "
                         f"on dataset {args.dataset!r}, and there is none", field="--backend")
    off = consensus[(consensus["consensus"] < scale.lo) | (consensus["consensus"] > scale.hi)]
    if not off.empty:
        row = off.iloc[0]
        raise InputError(f"the simulated rater needs consensus on the rubric's scale {scale.lo}-{scale.hi}; pool "
                         f"{row['pool']!r} gives {row['candidate_id']!r} {row['consensus']:g} ({len(off)} such values)",
                         field="--backend")
    return backend_args.simulated_backend(simulated_rater, args.model, consensus)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.run_rater", description=__doc__.split("\n\n")[0])
    backend_args.add_target_arguments(parser, judge_help="name to record this rating judge under")
    backend_args.add_condition_arguments(parser, default_condition=DEFAULT_CONDITION, conditions=DEFAULT_CONDITIONS,
                                         instruction=DEFAULT_INSTRUCTION, instruction_help="rubric instruction file")
    backend_args.add_run_arguments(parser, limit_help="only the first N items (in store order)", max_new_tokens=16)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = backend_args.parse_checked(build_parser(), argv)
    conditions = args.condition or [DEFAULT_CONDITION]
    config = backend_args.recorded_config(args)
    db = DatabaseFile(args.db)

    def job() -> RunSummary:
        values.names({"--dataset": args.dataset, "--judge": args.judge, "--condition": conditions})
        instruction = load_rubric(args.instruction, args.structured)
        chosen = select_conditions(args.conditions, conditions)
        with db.session() as con:
            scope = load_rating_scope(con, dataset=args.dataset, outcome=instruction.outcome, limit=args.limit)
        # Check conditions, demonstrations and images before loading a model that may take minutes.
        plan_ratings(scope, judge=args.judge, instruction=instruction, conditions=chosen)
        return run_rater(
            db,
            dataset=args.dataset,
            judge=args.judge,
            backend=make_backend(args, scope.consensus, instruction.scale),
            backend_name=args.backend,
            model=args.model,
            conditions=conditions,
            conditions_file=args.conditions,
            instruction_file=args.instruction,
            structured=args.structured,
            **backend_args.run_options(args, config),
        )

    return run_job(job, interrupted="finished ratings are recorded")


if __name__ == "__main__":
    sys.exit(main())
