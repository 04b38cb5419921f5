"""Record a content-only scorer (one score per candidate image, each scored alone), or the CLIP zero-shot labels.

    python -m runners.score --db DB --dataset NAME --scorer NAME \
        --backend {clip,simulated} --model ViT-L-14 [--pretrained openai]
    python -m runners.score --db DB --dataset NAME --scorer clip-zero-shot \
        --backend clip --model ViT-L-14 --pretrained openai --task labels \
        [--taxonomy FILE] [--templates FILE] [--limit N]

For `simulated`, --model names a scorer profile of runners/judges/simulated.json.
`--task content` (the default) records scores, committed pool by pool. `--task labels`
records the zero-shot attribute baseline (runners/labels/clip_labels.py; clip only) as a
labeler run named by --scorer: every attribute of the taxonomy (default
runners/taxonomies/default_v1.json) answered by the argmax over its labels' templated
prompts (default runners/templates/clip_labels_v1.json), committed image by image. The
database is released between writes, so the app can open it read-only meanwhile; run
the same command again to resume.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from audit_core import store
from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, load_taxonomy
from audit_core.ingest import values
from runners.backends.base import ScorerBackend
from runners.command import run_job
from runners.labels.clip_labels import DEFAULT_TEMPLATES, ZeroShotLabeler, load_label_prompts, record_clip_labels
from runners.labels.recorder import check_taxonomy, load_label_scope
from runners.recording import backend_args
from runners.recording.recorder import RunSummary, check_images, require_dataset
from runners.recording.scorer import record_scorer
from runners.recording.sessions import DatabaseFile

BACKENDS: tuple[str, ...] = ("clip", "simulated")
TASKS: tuple[str, ...] = ("content", "labels")


run_scorer = record_scorer  # the public name of the scoring path, for the demo and other callers


def make_backend(args: argparse.Namespace) -> ScorerBackend:
    """Build the scorer the flags ask for."""
    if args.backend == "simulated":
        from runners.backends.simulated import simulated_scorer

        return backend_args.simulated_backend(simulated_scorer, args.model)
    backend_args.require_model_extras("clip", ("torch", "open_clip"))
    from runners.backends.clip import ClipScorer

    return ClipScorer(args.model, pretrained=args.pretrained, device=args.device, batch_size=args.batch_size)


def make_label_backend(args: argparse.Namespace) -> ZeroShotLabeler:
    """The zero-shot labeler the flags ask for: the CLIP model with the taxonomy's templated prompts encoded."""
    prompts = load_label_prompts(args.templates, load_taxonomy(args.taxonomy))
    scorer = make_backend(args)
    from runners.backends.clip import zero_shot_classifier

    return ZeroShotLabeler(zero_shot_classifier(scorer, prompts.flat()), prompts, scorer.model_revision())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runners.score", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="DuckDB file holding the dataset")
    parser.add_argument("--dataset", required=True, help="dataset name in the store")
    parser.add_argument("--scorer", required=True, help="name to record this scorer under (labels: the labeler's, e.g. clip-zero-shot)")
    parser.add_argument("--backend", required=True, choices=BACKENDS)
    parser.add_argument("--model", required=True, help="open_clip architecture (clip) or profile (simulated)")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip pretrained tag or checkpoint file (clip), e.g. openai")
    parser.add_argument("--device", default="auto", help="auto, cuda, mps or cpu (clip)")
    parser.add_argument("--batch-size", type=int, default=32, help="images per forward pass (clip)")
    parser.add_argument("--task", choices=TASKS, default="content",
                        help="content: one score per image (default); labels: CLIP zero-shot attribute labels")
    parser.add_argument("--taxonomy", type=Path, default=None, metavar="FILE",
                        help="taxonomy file (labels; default runners/taxonomies/default_v1.json)")
    parser.add_argument("--templates", type=Path, default=None, metavar="FILE",
                        help="prompt templates per label (labels; default runners/templates/clip_labels_v1.json)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N images in store order (labels)")
    parser.add_argument("--replace", action="store_true", help="delete this scorer's earlier scores first")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def parse_checked(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed flags, the labels task's defaults filled in; a usage error (exit status 2) for the labels
    task without the clip backend, its flags without it, or a --limit below 1."""
    args = parser.parse_args(argv)
    if args.task == "labels":
        if args.backend != "clip":
            parser.error("--task labels needs --backend clip (the zero-shot baseline is CLIP's)")
        args.taxonomy = args.taxonomy or DEFAULT_TAXONOMY
        args.templates = args.templates or DEFAULT_TEMPLATES
    else:
        given = [flag for flag, value in (("--taxonomy", args.taxonomy), ("--templates", args.templates),
                                          ("--limit", args.limit)) if value is not None]
        if given:
            parser.error(f"{', '.join(given)} go with --task labels")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    return args


def label_job(args: argparse.Namespace, db: DatabaseFile, config: dict) -> RunSummary:
    """The labels task: check the dataset, taxonomy, templates and images, then load CLIP and record."""
    taxonomy = load_taxonomy(args.taxonomy)
    load_label_prompts(args.templates, taxonomy)
    with db.session() as con:
        scope = load_label_scope(con, dataset=args.dataset, limit=args.limit)
    check_taxonomy(scope, taxonomy)
    check_images(scope.images)
    return record_clip_labels(
        db, dataset=args.dataset, judge=args.scorer, backend=make_label_backend(args), model=args.model,
        weights=args.pretrained, taxonomy_file=args.taxonomy, templates_file=args.templates, limit=args.limit,
        progress=not args.quiet, replace=args.replace, config=config,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_checked(build_parser(), argv)
    unrecorded = {"quiet"} if args.task == "labels" else {"quiet", "task", "taxonomy", "templates", "limit"}
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in unrecorded}
    db = DatabaseFile(args.db)

    def job() -> RunSummary:
        values.names({"--dataset": args.dataset, "--scorer": args.scorer})
        if args.task == "labels":
            return label_job(args, db, config)
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

    return run_job(job, interrupted="scored pools and labelled images are recorded")


if __name__ == "__main__":
    sys.exit(main())
