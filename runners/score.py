"""Record a content-only scorer: one score per candidate image, each scored alone.

    python -m runners.score --db DB --dataset NAME --scorer NAME \
        --backend {clip,simulated} --model ViT-L-14 [--pretrained openai]

For `simulated`, --model names a scorer profile of runners/judges/simulated.json.
Scores are committed pool by pool and the database is released between
writes, so the app can open it read-only meanwhile; run the same command again
to resume.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from audit_core import store
from audit_core.errors import InputError
from runners import backend_args
from runners.backends.base import ScorerBackend
from runners.command import run_job
from runners.database import DatabaseFile
from runners.recorder import RunSummary, check_images, record_scorer, require_dataset

BACKENDS: tuple[str, ...] = ("clip", "simulated")


run_scorer = record_scorer  # the public name of the scoring path, for the demo and other callers


def make_backend(args: argparse.Namespace) -> ScorerBackend:
    """Build the scorer the flags ask for."""
    if args.backend == "simulated":
        from runners.backends.simulated import simulated_scorer

        try:
            return simulated_scorer(args.model)
        except ValueError as err:
            raise InputError(str(err), field="--model") from None
    backend_args.require_model_extras("clip", ("torch", "open_clip"))
    from runners.backends.clip import ClipScorer

    return ClipScorer(args.model, pretrained=args.pretrained, device=args.device, batch_size=args.batch_size)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="DuckDB file holding the dataset")
    parser.add_argument("--dataset", required=True, help="dataset name in the store")
    parser.add_argument("--scorer", required=True, help="name to record this scorer under")
    parser.add_argument("--backend", required=True, choices=BACKENDS)
    parser.add_argument("--model", required=True, help="open_clip architecture (clip) or profile (simulated)")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip pretrained tag or checkpoint file (clip), e.g. openai")
    parser.add_argument("--device", default="auto", help="auto, cuda, mps or cpu (clip)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per forward pass (clip)")
    parser.add_argument("--replace", action="store_true", help="delete this scorer's earlier scores first")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = {k: v for k, v in vars(args).items() if k != "quiet"}
    db = DatabaseFile(args.db)

    def job() -> RunSummary:
        with db.session() as con:
            require_dataset(con, args.dataset)
            candidates = store.load_candidates(con, args.dataset)
        check_images(candidates)
        return run_scorer(
            db,
            dataset=args.dataset,
            scorer=args.scorer,
            backend=make_backend(args),
            backend_name=args.backend,
            model=args.model,
            progress=not args.quiet,
            replace=args.replace,
            config=config,
        )

    return run_job(job, interrupted="scored pools are recorded")


if __name__ == "__main__":
    sys.exit(main())
