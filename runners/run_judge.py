"""Record a selector judge on a dataset: every prompt in several presentation orders.

    python -m runners.run_judge --db DB --dataset NAME --judge NAME \
        --backend {simulated,hf,openai} --model ID [--orders 3] \
        [--contract ranking|choice] [--lenient] [--limit N] [--max-new-tokens 64] \
        [--max-edge 448] [--concurrency N] [--batch-size N] [--replace] \
        [--engine local|ray] [--replicas N] [--gpus-per-replica G] \
        [--base-url URL] [--timeout 120] [--max-response-bytes 4194304] [--structured] \
        [--logprobs [N]]

For `simulated`, --model names a profile of runners/judges/simulated.json.
Calls are committed as they finish and the database is released between
writes, so the app can open it read-only meanwhile; run the same command again
to resume. `--batch-size N` answers N requests per generate() (hf); `--engine
ray` runs the backend as replicas in a Ray cluster ($RAY_ADDRESS) while this
process stays the only writer (runners.recording.ray_engine). Each call records
the judge's probability for every offered label where its choice was generated
(label_probs): always with hf, with `--logprobs` from an openai endpoint that
returns log-probabilities. Bad input exits with
status 2, a database or judge name held by
another process with status 1.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence

from audit_core.ingest import values
from runners.backends.base import SelectorBackend
from runners.command import run_job
from runners.recording import backend_args
from runners.recording.engines import Engine
from runners.recording.recorder import RunSummary
from runners.recording.sessions import DatabaseFile
from runners.selection.parsing import CONTRACTS
from runners.selection.recorder import load_scope, plan_scope, record_selector

run_selector = record_selector  # the public name of the recording path, for the demo and other callers


def make_backend(args: argparse.Namespace) -> SelectorBackend:
    """Build the backend the flags ask for (heavy imports only for the chosen one)."""
    if args.backend != "simulated":
        return backend_args.model_backend(args)
    from runners.backends.simulated import simulated_selector

    return backend_args.simulated_backend(simulated_selector, args.model)


def make_engine(args: argparse.Namespace) -> Engine | None:
    """The Ray engine when the flags ask for it (each replica builds the backend from the flags), else None."""
    if args.engine != "ray":
        return None
    from runners.recording.ray_engine import RayEngine

    return RayEngine(functools.partial(make_backend, args), replicas=args.replicas,
                     gpus_per_replica=args.gpus_per_replica, batch_size=args.batch_size)


def build_parser() -> argparse.ArgumentParser:
    from runners.backends.simulated import profile_descriptions

    profiles = "\n".join(f"  {name}: {text}" for name, text in profile_descriptions("selectors").items())
    parser = argparse.ArgumentParser(
        prog="python -m runners.run_judge",
        description=__doc__.split("\n\n")[0],
        epilog=f"simulated judge profiles (--backend simulated --model NAME):\n{profiles}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    backend_args.add_target_arguments(parser, judge_help="name to record this judge under")
    parser.add_argument("--orders", type=int, default=3, help="presentation orders per prompt (default 3)")
    parser.add_argument("--contract", choices=CONTRACTS, default="ranking", help="output contract (default ranking)")
    parser.add_argument("--lenient", action="store_true", help="recover bare labels and alias keys (flagged)")
    backend_args.add_run_arguments(parser, limit_help="only the first N prompts (by id)", max_new_tokens=64)
    backend_args.add_logprobs_argument(parser)
    backend_args.add_engine_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = backend_args.parse_checked(build_parser(), argv)
    config = backend_args.recorded_config(args)
    db = DatabaseFile(args.db)

    def job() -> RunSummary:
        values.names({"--dataset": args.dataset, "--judge": args.judge})
        with db.session() as con:
            scope = load_scope(con, dataset=args.dataset, limit=args.limit)
        # Check dataset, pools and images before loading a model that may take minutes.
        plan_scope(scope, judge=args.judge, orders=args.orders, contract=args.contract, structured=args.structured)
        engine = make_engine(args)
        return run_selector(
            db,
            dataset=args.dataset,
            judge=args.judge,
            backend=None if engine else make_backend(args),
            engine=engine,
            backend_name=args.backend,
            model=args.model,
            orders=args.orders,
            contract=args.contract,
            lenient=args.lenient,
            structured=args.structured,
            **backend_args.run_options(args, config),
        )

    return run_job(job, interrupted="finished calls are recorded")


if __name__ == "__main__":
    sys.exit(main())
