"""Record a selector judge on a dataset: every prompt in several presentation orders.

    python -m runners.run_judge --db DB --dataset NAME --judge NAME \
        --backend {simulated,hf,openai} --model ID [--orders 3] \
        [--contract ranking|choice] [--lenient] [--limit N] [--max-new-tokens 64] \
        [--max-edge 448] [--concurrency N] [--replace] \
        [--base-url URL] [--timeout 120] [--max-response-bytes 4194304]

For `simulated`, --model names a profile of runners/judges/simulated.json.
Calls are committed as they finish and the database is released between
writes, so the app can open it read-only meanwhile; run the same command again
to resume. Bad input exits with status 2, a database or judge name held by
another process with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from audit_core.errors import InputError
from runners.backends.base import SelectorBackend
from runners.backends.openai_compat import DEFAULT_MAX_RESPONSE_BYTES
from runners.command import run_job
from runners.database import DatabaseFile
from runners.parsing import CONTRACTS
from runners.recorder import RunSummary, load_scope, plan_scope, record_selector

BACKENDS: tuple[str, ...] = ("simulated", "hf", "openai")


run_selector = record_selector  # the public name of the recording path, for the demo and other callers


def make_backend(args: argparse.Namespace) -> SelectorBackend:
    """Build the backend the flags ask for (heavy imports only for the chosen one)."""
    if args.backend == "simulated":
        from runners.backends.simulated import simulated_selector

        try:
            return simulated_selector(args.model)
        except ValueError as err:
            raise InputError(str(err), field="--model") from None
    if args.backend == "hf":
        from runners.backends.hf import HFSelector

        return HFSelector(
            args.model,
            revision=args.revision,
            max_new_tokens=args.max_new_tokens,
            max_edge=args.max_edge,
            device=args.device,
        )
    from runners.backends.openai_compat import OpenAISelector

    try:
        return OpenAISelector(
            args.model,
            base_url=args.base_url,
            api_key=args.api_key,
            max_new_tokens=args.max_new_tokens,
            max_edge=args.max_edge,
            timeout=args.timeout,
            revision=args.revision,
            max_response_bytes=args.max_response_bytes,
        )
    except ValueError as err:
        raise InputError(str(err), field="--base-url") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.run_judge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="DuckDB file holding the dataset")
    parser.add_argument("--dataset", required=True, help="dataset name in the store")
    parser.add_argument("--judge", required=True, help="name to record this judge under")
    parser.add_argument("--backend", required=True, choices=BACKENDS)
    parser.add_argument("--model", required=True,
                        help="model id or local path (hf), served model name (openai), profile (simulated)")
    parser.add_argument("--orders", type=int, default=3, help="presentation orders per prompt (default 3)")
    parser.add_argument("--contract", choices=CONTRACTS, default="ranking", help="output contract (default ranking)")
    parser.add_argument("--lenient", action="store_true", help="recover bare labels and alias keys (flagged)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts (by id)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="generation bound (hf, openai)")
    parser.add_argument("--max-edge", type=int, default=448,
                        help="resize images to fit this bounding box, aspect kept (hf, openai)")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once")
    parser.add_argument("--replace", action="store_true", help="delete this judge's earlier records first")
    parser.add_argument("--revision", default=None, help="model revision: loaded (hf) or recorded as given (openai)")
    parser.add_argument("--device", default="auto", help="auto, cuda, mps or cpu (hf)")
    parser.add_argument("--base-url", default=None, help="endpoint base URL (openai; else $OPENAI_BASE_URL)")
    parser.add_argument("--api-key", default=None, help="API key (openai; else $OPENAI_API_KEY)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="wall-clock deadline in seconds for each request, body included (openai)")
    parser.add_argument("--max-response-bytes", type=int, default=DEFAULT_MAX_RESPONSE_BYTES,
                        help="refuse a response body larger than this: a runtime failure (openai; default 4 MiB)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if not 0 < args.timeout < float("inf"):
        parser.error("--timeout must be a positive number of seconds")
    if args.max_response_bytes < 1:
        parser.error("--max-response-bytes must be at least 1")
    config = {k: v for k, v in vars(args).items() if k not in ("api_key", "quiet")}
    db = DatabaseFile(args.db)

    def job() -> RunSummary:
        with db.session() as con:
            scope = load_scope(con, dataset=args.dataset, limit=args.limit)
        # Check dataset, pools and images before loading a model that may take minutes.
        plan_scope(scope, judge=args.judge, orders=args.orders, contract=args.contract)
        return run_selector(
            db,
            dataset=args.dataset,
            judge=args.judge,
            backend=make_backend(args),
            backend_name=args.backend,
            model=args.model,
            orders=args.orders,
            contract=args.contract,
            lenient=args.lenient,
            limit=args.limit,
            concurrency=args.concurrency,
            progress=not args.quiet,
            replace=args.replace,
            config=config,
        )

    return run_job(job, interrupted="finished calls are recorded")


if __name__ == "__main__":
    sys.exit(main())
