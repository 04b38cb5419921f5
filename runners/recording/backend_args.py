"""What the judge commands (`run_judge`, `run_rater`, `run_labeler`) share: their dataset, judge, backend
and condition flags, the checks on them, the config they record, the run options taken from them, and the
backends built from them."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from audit_core.errors import InputError
from runners.backends.base import SelectorBackend
from runners.backends.openai_compat import DEFAULT_MAX_RESPONSE_BYTES

BACKENDS: tuple[str, ...] = ("simulated", "hf", "openai")
ENGINES: tuple[str, ...] = ("local", "ray")
UNRECORDED_FLAGS = ("api_key", "quiet")  # a secret, and display only
B = TypeVar("B")


def add_target_arguments(parser: argparse.ArgumentParser, *, judge_help: str) -> None:
    """--db, --dataset, --judge, --backend, --model: where to record, under what name, with which model."""
    parser.add_argument("--db", required=True, help="DuckDB file holding the dataset")
    parser.add_argument("--dataset", required=True, help="dataset name in the store")
    parser.add_argument("--judge", required=True, help=judge_help)
    parser.add_argument("--backend", required=True, choices=BACKENDS)
    parser.add_argument("--model", required=True,
                        help="model id or local path (hf), served model name (openai), profile (simulated)")


def add_condition_arguments(
    parser: argparse.ArgumentParser, *, default_condition: str, conditions: Path, instruction: Path, instruction_help: str
) -> None:
    """--condition, --conditions, --instruction: which conditions of which conditions file, with which instruction."""
    parser.add_argument("--condition", nargs="+", action="extend", default=None, metavar="NAME",
                        help=f"conditions to run, from the conditions file (default: {default_condition})")
    parser.add_argument("--conditions", type=Path, default=conditions, metavar="FILE",
                        help=f"conditions file (JSON; default runners/conditions/{conditions.name})")
    parser.add_argument("--instruction", type=Path, default=instruction, metavar="FILE",
                        help=f"{instruction_help} (default runners/instructions/{instruction.name})")


def add_run_arguments(parser: argparse.ArgumentParser, *, limit_help: str, max_new_tokens: int) -> None:
    """--limit, then the generation, concurrency, hf and openai flags, and --quiet."""
    parser.add_argument("--limit", type=int, default=None, help=limit_help)
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens, help="generation bound (hf, openai)")
    parser.add_argument("--max-edge", type=int, default=448,
                        help="resize images to fit this bounding box, aspect kept (hf, openai)")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once")
    parser.add_argument("--batch-size", type=int, default=1,
                        help="requests per generate() call (hf: one padded batch; each call records the batch's "
                             "seconds shared out equally; other backends take a batch's calls one after another)")
    parser.add_argument("--replace", action="store_true", help="delete this judge's earlier records first")
    parser.add_argument("--revision", default=None, help="model revision: loaded (hf) or recorded as given (openai)")
    parser.add_argument("--device", default="auto", help="auto, cuda, mps or cpu (hf)")
    parser.add_argument("--base-url", default=None, help="endpoint base URL (openai; else $OPENAI_BASE_URL)")
    parser.add_argument("--api-key", default=None, help="API key (openai; else $OPENAI_API_KEY)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="wall-clock deadline in seconds for each request, body included (openai)")
    parser.add_argument("--max-response-bytes", type=int, default=DEFAULT_MAX_RESPONSE_BYTES,
                        help="refuse a response body larger than this: a runtime failure (openai; default 4 MiB)")
    parser.add_argument("--structured", action="store_true",
                        help="ask the server for JSON constrained to the supplied labels or the rubric's scale "
                             "(response_format json_schema, strict): a separate protocol condition with its own "
                             "request keys; the strict parser still checks every output (openai)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


LOGPROBS_DEFAULT = 20  # top log-probabilities asked for by a bare --logprobs (the OpenAI API's largest)


def add_logprobs_argument(parser: argparse.ArgumentParser) -> None:
    """--logprobs [N]: ask an openai endpoint for the top N log-probabilities of each token (a selector's
    label probabilities; the hf backend records them always)."""
    parser.add_argument("--logprobs", type=int, nargs="?", const=LOGPROBS_DEFAULT, default=None, metavar="N",
                        help="record each offered label's probability where the choice is generated: ask the "
                             f"server for logprobs with the top N per token (default N {LOGPROBS_DEFAULT}); a "
                             "server that does not return them leaves label_probs empty (openai; hf records "
                             "them always)")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine, --replicas, --gpus-per-replica: where the calls run (this process, or Ray replicas)."""
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="local: threads of this process; ray: backend replicas as Ray actors "
                             "($RAY_ADDRESS, else a cluster started on this machine, else a new local one)")
    parser.add_argument("--replicas", type=int, default=None,
                        help="backend replicas (ray; default one per GPU of the cluster, 1 without GPUs)")
    parser.add_argument("--gpus-per-replica", type=float, default=None,
                        help="GPUs each replica holds, fractions allowed "
                             "(ray; default 1 when the cluster has GPUs, else 0)")


def parse_checked(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed flags; a usage error (exit status 2) for a --limit below 1, a timeout that is not a
    positive finite number of seconds, a --max-response-bytes below 1, a --batch-size below 1, --replicas
    below 1 or --gpus-per-replica below 0 (or either without --engine ray), --structured without
    --backend openai, or --logprobs below 1 or without --backend openai."""
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    engine = getattr(args, "engine", "local")
    for flag, value, low in (("--replicas", getattr(args, "replicas", None), 1),
                             ("--gpus-per-replica", getattr(args, "gpus_per_replica", None), 0)):
        if value is not None and engine != "ray":
            parser.error(f"{flag} needs --engine ray")
        if value is not None and not low <= value < float("inf"):
            parser.error(f"{flag} must be at least {low}")
    if not 0 < args.timeout < float("inf"):
        parser.error("--timeout must be a positive number of seconds")
    if args.max_response_bytes < 1:
        parser.error("--max-response-bytes must be at least 1")
    if args.structured and args.backend != "openai":
        parser.error("--structured needs --backend openai (it is the server's response_format)")
    logprobs = getattr(args, "logprobs", None)
    if logprobs is not None and args.backend != "openai":
        parser.error("--logprobs needs --backend openai (the hf backend records label probabilities always)")
    if logprobs is not None and logprobs < 1:
        parser.error("--logprobs must be at least 1")
    return args


def recorded_config(args: argparse.Namespace) -> dict:
    """The flags as stored in the run's config_json: all but UNRECORDED_FLAGS, paths as strings, and the
    command line (`argv`) with an --api-key value, however it was spelled, replaced by "<redacted>"."""
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in UNRECORDED_FLAGS}
    secret = getattr(args, "api_key", None)
    config["argv"] = [a.replace(secret, "<redacted>") if secret else a for a in sys.argv]
    return config


def run_options(args: argparse.Namespace, config: dict) -> dict:
    """The keyword arguments every recording path takes from the run flags: limit, concurrency,
    batch_size, progress (not --quiet), replace, and the recorded `config`."""
    return dict(limit=args.limit, concurrency=args.concurrency, batch_size=args.batch_size, progress=not args.quiet,
                replace=args.replace, config=config)


def simulated_backend(make: Callable[..., B], profile: str, *data: object) -> B:
    """`make(profile, *data)`, a simulated backend; an unknown profile (ValueError) is bad input to --model."""
    try:
        return make(profile, *data)
    except ValueError as err:
        raise InputError(str(err), field="--model") from None


def require_model_extras(backend: str, modules: Sequence[str]) -> None:
    """InputError naming the missing packages and the install command when `backend` needs
    modules this environment lacks (the app's set-up installs no torch)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(
            f"the {backend} backend needs {', '.join(missing)}, which this environment lacks; install the model "
            "extras with `.venv/bin/python -m pip install -r requirements-models.txt` (torch installs from "
            "this machine's disk, about 5.5 GB)",
            field="--backend",
        )


def model_backend(args: argparse.Namespace) -> SelectorBackend:
    """The hf or openai backend the flags ask for (its heavy imports only then); it serves selectors and raters."""
    if args.backend == "hf":
        require_model_extras("hf", ("torch", "transformers"))
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
            top_logprobs=getattr(args, "logprobs", None),
        )
    except ValueError as err:
        raise InputError(str(err), field="--base-url") from None
