"""Record an attribute judge on a dataset: every image alone, answering every attribute at once, per condition.

    python -m runners.run_labeler --db DB --dataset NAME --judge NAME \
        --backend {simulated,hf,openai} --model ID --taxonomy FILE [--condition NAME ...] \
        [--conditions FILE] [--instruction FILE] [--limit N] [--concurrency N] [--replace] \
        [--max-new-tokens 512] [--max-edge 448]

The judge sees one image and a versioned instruction (default
runners/instructions/attributes_v1.txt) that asks each attribute of the taxonomy (default
runners/taxonomies/default_v1.json) with its labels and abstention option, as the named
conditions of a conditions file show them (default runners/conditions/attributes_v1.json:
default, no_label_list, no_unspecified; condition `default` unless --condition is given),
and answers one JSON object with exactly the taxonomy's keys (runners/labels/parsing.py).
For `simulated`, --model names a profile of runners/judges/simulated_labelers.json, which
peeks at the dataset's gold labels (SIMULATED: a demo and test device only). Calls are
committed as they finish and the database is released between writes; run the same command
again to resume. Bad input exits with status 2, a database or judge name held by another
process with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from audit_core import store
from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, load_taxonomy
from audit_core.errors import InputError
from audit_core.ingest import values
from runners.command import run_job
from runners.labels.protocol import (
    DEFAULT_CONDITION,
    DEFAULT_CONDITIONS,
    DEFAULT_INSTRUCTION,
    LabelBackend,
    load_label_instruction,
    select_label_conditions,
)
from runners.labels.recorder import load_label_scope, plan_labels, record_labeler
from runners.recording import backend_args
from runners.recording.recorder import RunSummary
from runners.recording.sessions import DatabaseFile

run_labeler = record_labeler  # the public name of the labeling path, for the demo and other callers


def make_backend(args: argparse.Namespace, gold: pd.DataFrame) -> LabelBackend:
    """Build the backend the flags ask for; hf and openai are the selectors' backends, unchanged.

    A simulated labeler is handed the dataset's gold labels (candidate_id, attribute, label).
    """
    if args.backend != "simulated":
        return backend_args.model_backend(args)
    from runners.backends.simulated_labeler import simulated_labeler

    if gold.empty:
        raise InputError(f"the simulated labeler needs gold labels on dataset {args.dataset!r} (ingest them with "
                         "--labels FILE), and there are none", field="--backend")
    return backend_args.simulated_backend(simulated_labeler, args.model, gold)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.run_labeler", description=__doc__.split("\n\n")[0])
    backend_args.add_target_arguments(parser, judge_help="name to record this attribute judge under")
    parser.add_argument("--taxonomy", type=Path, default=DEFAULT_TAXONOMY, metavar="FILE",
                        help="taxonomy file (JSON; default runners/taxonomies/default_v1.json)")
    backend_args.add_condition_arguments(parser, default_condition=DEFAULT_CONDITION, conditions=DEFAULT_CONDITIONS,
                                         instruction=DEFAULT_INSTRUCTION, instruction_help="instruction file")
    backend_args.add_run_arguments(parser, limit_help="only the first N images (in store order)", max_new_tokens=512)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = backend_args.parse_checked(parser, argv)
    if getattr(args, "structured", False):
        parser.error("--structured is not offered for attribute judges: their answers are parsed against the "
                     "taxonomy, including the answers off it that a constrained decoder would hide")
    conditions = args.condition or [DEFAULT_CONDITION]
    config = backend_args.recorded_config(args)
    db = DatabaseFile(args.db)

    def job() -> RunSummary:
        values.names({"--dataset": args.dataset, "--judge": args.judge, "--condition": conditions})
        taxonomy = load_taxonomy(args.taxonomy)
        instruction = load_label_instruction(args.instruction)
        chosen = select_label_conditions(args.conditions, conditions)
        with db.session() as con:
            scope = load_label_scope(con, dataset=args.dataset, limit=args.limit)
            gold = store.load_gold_labels(con, args.dataset)
        # Check the taxonomy and images before loading a model that may take minutes.
        plan_labels(scope, judge=args.judge, model=args.model, instruction=instruction, taxonomy=taxonomy,
                    conditions=chosen)
        return run_labeler(
            db,
            dataset=args.dataset,
            judge=args.judge,
            backend=make_backend(args, gold),
            backend_name=args.backend,
            model=args.model,
            taxonomy_file=args.taxonomy,
            conditions=conditions,
            conditions_file=args.conditions,
            instruction_file=args.instruction,
            **backend_args.run_options(args, config),
        )

    return run_job(job, interrupted="finished calls are recorded")


if __name__ == "__main__":
    sys.exit(main())
