"""Build the built-in demo: simulated pools, drawn images and simulated judges.

    python -m runners.demo --db data/demo.duckdb [--prompts 300] [--rating-prompts 120] [--attribute-prompts 40]
        [--seed 0] [--force]

Pools are shaped like CulturalFrames (10 countries × 5 categories, 3–4
candidates from 4 generators, 2–4 annotators per image rating alignment in
{0, 0.5, 1}, plus cultural-error flags, image quality and overall 1–5). Every
number is SIMULATED. The judges are the simulated profiles of
runners/judges/simulated.json and go through the same recording path as real
judges. Same seed, same database content (timestamps and timings aside).
The same database also gets the rating demo, dataset `ratings-demo`
(`runners.demo.ratings`): a simulated cross-cultural rating study with two
annotator pools and simulated rating judges, and the attribute demo, dataset
`attributes-demo` (`runners.demo.attributes`): simulated people images with gold
labels and simulated attribute judges. Each dataset is rebuilt only when it is
missing or incomplete, all with --force.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit_core import store
from audit_core.errors import InputError
from audit_core.ingest.pools import PoolSet
from runners.command import STORAGE_ERRORS, storage_failed
from runners.demo import attributes as demo_attributes
from runners.demo import ratings as demo_ratings
from runners.demo.datasets import demo_pool_set, read_if_built, written
from runners.demo.images import draw_image

DATASET = "demo"
SIMULATED_NOTE = "SIMULATED demo: generated pools, ratings and judges (not real model or human data)"

COUNTRIES: dict[str, tuple[str, float]] = {
    # country: (demonym, generators' mean alignment shift for it)
    "Brazil": ("Brazilian", 0.00),
    "Canada": ("Canadian", 0.06),
    "China": ("Chinese", 0.02),
    "Germany": ("German", 0.05),
    "India": ("Indian", -0.04),
    "Iran": ("Iranian", -0.12),
    "Japan": ("Japanese", 0.03),
    "Nigeria": ("Nigerian", -0.10),
    "Poland": ("Polish", -0.02),
    "South Africa": ("South African", -0.06),
}

SCENES: dict[str, tuple[str, ...]] = {
    "religion": (
        "{d} family attending a service at a local place of worship",
        "{d} elders praying together at dawn",
        "A {d} wedding ceremony led by a religious leader",
        "{d} pilgrims walking to a shrine",
        "Children in {c} learning prayers from a grandparent",
        "A {d} religious festival procession through town",
    ),
    "greetings": (
        "{d} colleagues greeting each other at the office",
        "A {d} host welcoming guests at the door",
        "Two {d} friends meeting at a market",
        "{d} students greeting their teacher",
        "A {d} grandmother greeting her grandchildren",
        "{d} neighbours saying goodbye after dinner",
    ),
    "dates-of-significance": (
        "{d} family celebrating the new year at home",
        "{d} crowd watching national day fireworks",
        "A {d} harvest festival in a village square",
        "{d} children in costumes for a seasonal holiday",
        "{d} friends exchanging gifts on a holiday",
        "A {d} street parade on a day of national significance",
    ),
    "family": (
        "A {d} family sharing a meal together",
        "{d} parents walking their children to school",
        "Three generations of a {d} family posing for a photo",
        "A {d} father cooking with his daughter",
        "{d} siblings playing in the living room",
        "A {d} family visiting their grandparents",
    ),
    "cuisine": (
        "A {d} street vendor preparing a local dish",
        "{d} friends sharing a traditional breakfast",
        "A {d} chef plating a festive dish",
        "{d} family cooking together for a holiday",
        "A table set with {d} home cooking",
        "Tea served to guests in a {d} home",
    ),
}


@dataclass(frozen=True)
class Generator:
    suffix: str  # candidate id suffix
    name: str  # source_model
    skill: float  # mean alignment
    quality: float  # mean image quality
    stereotype: float  # base rate of stereotyped depictions


GENERATORS: tuple[Generator, ...] = (
    Generator("SD35", "SD-3.5-Large", 0.55, 0.60, 0.24),
    Generator("flux", "Flux.1-Dev", 0.62, 0.75, 0.18),
    Generator("gpt-image", "GPT-Image", 0.78, 0.85, 0.08),
    Generator("imagegen3", "Imagen3", 0.72, 0.80, 0.12),
)

DEMO_JUDGES: tuple[tuple[str, str, bool], ...] = (
    # judge name, simulated profile, lenient parsing
    ("slot-a-judge", "slot_a", False),
    ("strong-judge", "strong", False),
    ("weak-judge", "weak", True),
)
DEMO_SCORER = ("content-scorer", "content")


def _half_points(x: np.ndarray) -> np.ndarray:
    """Round to the rating scale {0, 0.5, 1}."""
    return np.clip(np.round(2 * x) / 2, 0.0, 1.0)


def build_pools(n_prompts: int, seed: int, image_dir: Path) -> PoolSet:
    """Generate prompts, candidates (images drawn to `image_dir`), ratings and votes."""
    rng = np.random.default_rng(seed)
    image_dir.mkdir(parents=True, exist_ok=True)
    cells = [(c, cat) for c in COUNTRIES for cat in SCENES]
    prompts, candidates, ratings, votes = [], [], [], []
    for i in range(n_prompts):
        country, category = cells[i % len(cells)]
        demonym, shift = COUNTRIES[country]
        template = SCENES[category][(i // len(cells)) % len(SCENES[category])]
        variant = i // (len(cells) * len(SCENES[category]))
        text = template.format(d=demonym, c=country) + (f" (scene {variant + 1})" if variant else "")
        pid = hashlib.sha256(f"demo:{seed}:{i}:{text}".encode()).hexdigest()[:16]
        prompts.append({"prompt_id": pid, "prompt": text, "country": country, "category": category, "split": "demo"})
        dropped = int(rng.integers(0, len(GENERATORS))) if rng.random() >= 0.4 else -1
        members = [g for k, g in enumerate(GENERATORS) if k != dropped]
        difficulty = rng.normal(0, 0.1)
        for gen in members:
            cid = f"{pid}_{gen.suffix}"
            q = float(np.clip(gen.skill + shift + difficulty + rng.normal(0, 0.15), 0, 1))
            q_img = float(np.clip(gen.quality + rng.normal(0, 0.12), 0, 1))
            path = image_dir / f"{cid}.png"
            seen = float(np.clip(q + rng.normal(0, 0.12), 0, 1))
            draw_image(text, seen, seed=int(rng.integers(0, 2**31)), style=GENERATORS.index(gen)).save(path)
            candidates.append({"prompt_id": pid, "candidate_id": cid, "source_model": gen.name, "image_path": str(path.resolve())})
            n = int(rng.choice([2, 3, 4], p=[0.3, 0.5, 0.2]))
            stereo_rate = gen.stereotype + max(0.0, -shift)
            drawn = {
                "alignment": _half_points(q + rng.normal(0, 0.2, n)),
                "missing_explicit": (rng.random(n) < np.clip(0.7 * (1 - q) - 0.05, 0, 1)).astype(float),
                "missing_implicit": (rng.random(n) < 0.4 * (1 - q)).astype(float),
                "stereotype": (rng.random(n) < stereo_rate).astype(float),
                "image_quality": _half_points(q_img + rng.normal(0, 0.2, n)),
                "overall": (np.clip(np.round(1 + 4 * (0.6 * q + 0.4 * q_img) + rng.normal(0, 0.6, n)), 1, 5) - 1) / 4,
            }
            for outcome, values in drawn.items():
                ratings.append({"candidate_id": cid, "outcome": outcome, "pool": "all", "value": float(values.mean()), "n": n})
                votes.extend(
                    {"candidate_id": cid, "outcome": outcome, "pool": "all", "annotator": str(a), "value": float(v)}
                    for a, v in enumerate(values)
                )
    return demo_pool_set(DATASET, seed, SIMULATED_NOTE, prompts=prompts, candidates=candidates, ratings=ratings,
                         votes=votes)


def is_built(db: Path, seed: int, n_prompts: int) -> bool:
    """True when `db` already holds the demo for this seed and size with all judges."""
    found = read_if_built(db, DATASET, seed, lambda con: (
        len(store.load_prompts(con, DATASET)), set(store.load_judges(con, DATASET)["judge"])))
    if found is None:
        return False
    n, judges = found
    expected = {name for name, _, _ in DEMO_JUDGES} | {DEMO_SCORER[0]}
    return n == n_prompts and expected <= judges


def build_demo(db: Path, *, n_prompts: int = 300, seed: int = 0, progress: bool = True) -> None:
    """Write pools, then record every simulated judge and the scorer into `db`."""
    from runners.backends.simulated import simulated_scorer, simulated_selector
    from runners.run_judge import run_selector
    from runners.score import run_scorer

    image_dir = db.parent / f"{db.stem}_images"
    pools = build_pools(n_prompts, seed, image_dir)
    with written(db, pools) as con:
        for judge, profile, lenient in DEMO_JUDGES:
            run_selector(
                con,
                dataset=DATASET,
                judge=judge,
                backend=simulated_selector(profile),
                backend_name="simulated",
                model=profile,
                orders=3,
                lenient=lenient,
                progress=progress,
            )
        scorer, profile = DEMO_SCORER
        run_scorer(
            con,
            dataset=DATASET,
            scorer=scorer,
            backend=simulated_scorer(profile),
            backend_name="simulated",
            model=profile,
            progress=progress,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("data/demo.duckdb"))
    parser.add_argument("--prompts", type=int, default=300, help="number of prompts (default 300)")
    parser.add_argument("--rating-prompts", type=int, default=120,
                        help="prompts of the rating demo, two images each (default 120)")
    parser.add_argument("--attribute-prompts", type=int, default=40,
                        help="prompts of the attribute demo, three images each (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="rebuild even if the demo is already there")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.prompts < 1:
        parser.error("--prompts must be at least 1")
    if args.rating_prompts < 1:
        parser.error("--rating-prompts must be at least 1")
    if args.attribute_prompts < 1:
        parser.error("--attribute-prompts must be at least 1")
    start = time.perf_counter()
    try:
        built = build_missing(args)
    except InputError as err:  # a --db that cannot be a store (DatabaseFileError)
        print(f"error: {err}", file=sys.stderr)
        return 2
    except STORAGE_ERRORS as err:  # a full disk: each dataset's pools are one transaction, each judge call is kept
        return storage_failed(err, "what was finished is kept, and the same command builds the rest once it can write")
    if not built:
        print(f"{args.db}: demo already built (seed {args.seed}); use --force to rebuild")
        return 0
    print(f"{args.db}: SIMULATED demo built in {time.perf_counter() - start:.1f} s ({'; '.join(built)})")
    return 0


def build_missing(args: argparse.Namespace) -> list[str]:
    """Build the demo datasets (selection, rating, attributes) that are missing or incomplete, or all of them
    with --force; returns a line on each built."""
    selection = args.force or not is_built(args.db, args.seed, args.prompts)
    rating = args.force or not demo_ratings.is_built(args.db, args.seed, args.rating_prompts)
    attributes = args.force or not demo_attributes.is_built(args.db, args.seed, args.attribute_prompts)
    built = []
    if selection:
        build_demo(args.db, n_prompts=args.prompts, seed=args.seed, progress=not args.quiet)
        built.append(f"{DATASET}: {args.prompts} prompts, {len(DEMO_JUDGES)} judges x 3 orders, 1 scorer")
    if rating:
        demo_ratings.build_rating_demo(args.db, n_prompts=args.rating_prompts, seed=args.seed, progress=not args.quiet)
        built.append(f"{demo_ratings.DATASET}: {len(demo_ratings.CULTURES) * args.rating_prompts} images, "
                     f"{len(demo_ratings.POOLS)} pools x {demo_ratings.ANNOTATORS} annotators, "
                     f"{len(demo_ratings.DEMO_RATERS)} rating judges")
    if attributes:
        demo_attributes.build_attribute_demo(args.db, n_prompts=args.attribute_prompts, seed=args.seed,
                                             progress=not args.quiet)
        built.append(f"{demo_attributes.DATASET}: {len(demo_attributes.GENERATORS) * args.attribute_prompts} images "
                     f"with gold labels, {len(demo_attributes.JUDGES)} attribute judges")
    return built


if __name__ == "__main__":
    sys.exit(main())
