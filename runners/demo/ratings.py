"""Build the rating demo: a SIMULATED cross-cultural rating study, its two annotator pools and simulated raters.

Dataset `ratings-demo`: shared prompts in three categories, each with two
candidate images, one per culture (item attribute `culture`, A or B). Two
pools of five annotators rate every image on the 1-5 rubric: pool a stands
for annotators from culture A, pool b for culture B. Each pool is reliable
(its annotators share its norms), and the pools agree on clear items (a
faithful image, an image that misses the prompt) and split on contested ones,
where each pool rates its own culture's image higher. Stored: the votes
(outcome `rubric`, pools a and b), each pool's consensus as `ratings` rows
(mean of its five votes, n = 5) and, for the selection audit per pool, the
same consensus rescaled to [0, 1] as `alignment` ((c - 1) / 4) for pools a,
b and `all` (over both pools' votes). The raters are the simulated profiles
of runners/judges/simulated_raters.json, recorded through `record_rater`
like real judges. A SIMULATED content-only scorer (`content-scorer`, profile
`content` of runners/judges/simulated.json: each image's drawn quality read back
from its pixels, plus noise) is recorded through `record_scorer`, as the
selection demo's is, so the rubric can be set beside a content scorer on the
same images (`audit_core.rating.rubric_vs_scorer`). Every number is SIMULATED. Same
seed, same content.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from audit_core import store
from audit_core.ingest.pools import PoolSet
from runners.demo.datasets import demo_pool_set, read_if_built, written
from runners.demo.images import draw_image

DATASET = "ratings-demo"
SIMULATED_NOTE = ("SIMULATED rating demo: generated images, annotator votes and rating judges "
                  "(not real model or human data)")
OUTCOME = "rubric"
SCALE = (1, 5)
CULTURES: tuple[str, ...] = ("A", "B")  # image culture; pool k of POOLS shares culture k's norms
POOLS: tuple[str, ...] = ("a", "b")
ANNOTATORS = 5  # per pool

CATEGORIES: dict[str, tuple[str, ...]] = {
    "food": (
        "A family sharing a festive meal",
        "A street vendor serving breakfast",
        "Friends cooking a traditional dish together",
        "A grandmother baking bread",
        "Guests being served tea",
        "A market stall selling fresh produce",
        "A child eating lunch at school",
        "A cook plating a holiday dish",
    ),
    "dress": (
        "A bride and groom in wedding clothes",
        "A teacher dressed for work",
        "Elders in festival clothing",
        "A student in a school uniform",
        "A farmer dressed for the fields",
        "Dancers in traditional costume",
        "A family dressed for a religious service",
        "A grandfather in his best clothes",
    ),
    "celebrations": (
        "A new year celebration",
        "A birthday party for a child",
        "A harvest festival",
        "A street parade",
        "A coming-of-age ceremony",
        "Neighbours celebrating a national holiday",
        "A family gathering to remember an ancestor",
        "Fireworks over a town square",
    ),
}
SETTINGS: tuple[str, ...] = ("at home", "in a village", "in a city", "in the evening", "on a rainy day")

# The generator, on the 1-5 scale. A prompt is contested with CONTESTED_SHARE;
# then each image has a shared base in CONTESTED_BASE and a split in CONTESTED_SPLIT:
# its own culture's pool rates it base + split, the other pool base - split. Otherwise
# each image is a clear anchor both pools rate alike: high (HIGH_SHARE) or low.
CONTESTED_SHARE = 0.45
CONTESTED_BASE = (2.3, 3.7)
CONTESTED_SPLIT = (0.7, 1.4)
HIGH_SHARE = 0.55
HIGH_BASE = (4.1, 4.9)
LOW_BASE = (1.1, 1.9)
LENIENCY_SD = 0.15  # an annotator's own offset, fixed across items
VOTE_SD = 0.45  # an annotator's noise per vote

DEMO_RATERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # judge name, simulated profile, conditions (runners/conditions/default_v1.json)
    ("floor-rater", "floor", ("default",)),
    ("tilted-rater", "tilted", ("default", "insider_persona", "demos_a")),
    ("unsure-rater", "unsure", ("default",)),
)
DEMO_SCORER = ("content-scorer", "content")  # scorer name, simulated profile (runners/judges/simulated.json)


def prompt_texts(n_prompts: int) -> list[tuple[str, str]]:
    """(category, prompt) for each prompt: categories in turn, then subjects, then settings."""
    subjects = len(next(iter(CATEGORIES.values())))
    cycle = len(CATEGORIES) * subjects * len(SETTINGS)
    out = []
    for i in range(n_prompts):
        category = list(CATEGORIES)[i % len(CATEGORIES)]
        subject = CATEGORIES[category][(i // len(CATEGORIES)) % subjects]
        setting = SETTINGS[(i // (len(CATEGORIES) * subjects)) % len(SETTINGS)]
        variant = i // cycle
        out.append((category, f"{subject}, {setting}" + (f" (scene {variant + 1})" if variant else "")))
    return out


def pool_means(rng: np.random.Generator, n_prompts: int) -> tuple[np.ndarray, np.ndarray]:
    """Each image's shared quality (n_prompts, 2) and each pool's mean rating of it (n_prompts, 2 images, 2 pools).

    Image k of a prompt is culture k's; pool k shares culture k's norms.
    """
    contested = rng.random(n_prompts) < CONTESTED_SHARE
    high = rng.random((n_prompts, 2)) < HIGH_SHARE
    anchor = np.where(high, rng.uniform(*HIGH_BASE, (n_prompts, 2)), rng.uniform(*LOW_BASE, (n_prompts, 2)))
    base = np.where(contested[:, None], rng.uniform(*CONTESTED_BASE, (n_prompts, 2)), anchor)
    split = np.where(contested[:, None], rng.uniform(*CONTESTED_SPLIT, (n_prompts, 2)), 0.0)
    own = np.eye(2, dtype=bool)  # [image k, pool k]: the image's own culture's pool
    means = base[:, :, None] + np.where(own, 1.0, -1.0)[None] * split[:, :, None]
    return base, means


def rubric_votes(rng: np.random.Generator, means: np.ndarray) -> np.ndarray:
    """Votes (…, pools, ANNOTATORS) on the scale's points: round half up(mean + leniency + noise), clipped."""
    leniency = rng.normal(0, LENIENCY_SD, (len(POOLS), ANNOTATORS))
    noisy = means[..., None] + leniency + rng.normal(0, VOTE_SD, (*means.shape, ANNOTATORS))
    return np.clip(np.floor(noisy + 0.5), *SCALE)


def build_rating_pools(n_prompts: int, seed: int, image_dir: Path) -> PoolSet:
    """The rating demo's prompts, candidates (images drawn to `image_dir`), votes, consensus and culture."""
    rng = np.random.default_rng([seed, 1])  # a stream of its own: the selection demo's draws stay as they were
    image_dir.mkdir(parents=True, exist_ok=True)
    texts = prompt_texts(n_prompts)
    base, means = pool_means(rng, n_prompts)
    votes = rubric_votes(rng, means)  # (prompt, image, pool, annotator)
    lo, hi = SCALE
    prompts, candidates, attributes, vote_rows, rating_rows = [], [], [], [], []
    for i, (category, text) in enumerate(texts):
        pid = hashlib.sha256(f"{DATASET}:{seed}:{i}:{text}".encode()).hexdigest()[:16]
        prompts.append({"prompt_id": pid, "prompt": text, "country": None, "category": category, "split": "demo"})
        for k, culture in enumerate(CULTURES):
            cid = f"{pid}_{culture}"
            path = image_dir / f"{cid}.png"
            # The drawing shows the shared quality; how each pool reads the culture is in the votes.
            draw_image(text, (base[i, k] - lo) / (hi - lo), seed=int(rng.integers(0, 2**31)), style=k).save(path)
            candidates.append({"prompt_id": pid, "candidate_id": cid, "source_model": "simulated-generator",
                               "image_path": str(path.resolve())})
            attributes.append({"candidate_id": cid, "attribute": "culture", "value": culture})
            for p, pool in enumerate(POOLS):
                cast = votes[i, k, p]
                vote_rows.extend({"candidate_id": cid, "outcome": OUTCOME, "pool": pool, "annotator": f"{pool}{n + 1}",
                                  "value": float(v)} for n, v in enumerate(cast))
                rating_rows.append({"candidate_id": cid, "outcome": OUTCOME, "pool": pool,
                                    "value": float(cast.mean()), "n": ANNOTATORS})
                rating_rows.append({"candidate_id": cid, "outcome": "alignment", "pool": pool,
                                    "value": float((cast.mean() - lo) / (hi - lo)), "n": ANNOTATORS})
            rating_rows.append({"candidate_id": cid, "outcome": "alignment", "pool": "all",
                                "value": float((votes[i, k].mean() - lo) / (hi - lo)), "n": len(POOLS) * ANNOTATORS})
    return demo_pool_set(DATASET, seed, SIMULATED_NOTE, prompts=prompts, candidates=candidates, ratings=rating_rows,
                         votes=vote_rows, attributes=attributes)


def is_built(db: Path, seed: int, n_prompts: int) -> bool:
    """True when `db` holds the rating demo for this seed and size with every rater's calls under every condition."""
    found = read_if_built(db, DATASET, seed, lambda con: (
        len(store.load_prompts(con, DATASET)), store.load_rating_calls(con, DATASET).groupby("judge").size(),
        store.load_scores(con, DATASET).groupby("scorer").size()))
    if found is None:
        return False
    n, calls, scores = found
    n_items = len(CULTURES) * n_prompts
    return (n == n_prompts and scores.get(DEMO_SCORER[0], 0) == n_items
            and all(calls.get(judge, 0) == n_items * len(conditions) for judge, _, conditions in DEMO_RATERS))


def build_rating_demo(db: Path, *, n_prompts: int = 120, seed: int = 0, progress: bool = True) -> None:
    """Write the rating demo's pools into `db` (replacing an earlier one), then record every simulated rater
    and the simulated content scorer."""
    from runners.backends.simulated import simulated_scorer
    from runners.backends.simulated_rater import simulated_rater
    from runners.rating.recorder import pool_consensus, record_rater
    from runners.recording.scorer import record_scorer

    pools = build_rating_pools(n_prompts, seed, db.parent / f"{db.stem}_images" / DATASET)
    with written(db, pools) as con:
        consensus = pool_consensus(con, DATASET, OUTCOME)
        for judge, profile, conditions in DEMO_RATERS:
            record_rater(
                con,
                dataset=DATASET,
                judge=judge,
                backend=simulated_rater(profile, consensus),
                backend_name="simulated",
                model=profile,
                conditions=conditions,
                progress=progress,
            )
        scorer, profile = DEMO_SCORER
        record_scorer(con, dataset=DATASET, scorer=scorer, backend=simulated_scorer(profile), backend_name="simulated",
                      model=profile, progress=progress)
