"""Build the attribute demo: SIMULATED people images with gold labels and simulated attribute judges.

Dataset `attributes-demo`: prompts asking for a person in a profession, three drawn
candidate images each (one per simulated generator). Every image gets a gold label for
every attribute of the default taxonomy (runners/taxonomies/default_v1.json). The drawing
shows gender, age and profession plainly (hair, size and grey hair, coat colour and a
tool) and religion, culture and disability only as a faint mark in a corner: visible and
weakly visible attributes, as in the published protocol.

Judges (simulated from the gold labels, not from the pixels; a device of the demo only),
recorded through the paths real ones take:

| judge | recorded by | simulated behaviour |
|---|---|---|
| `careful-labeler` | `record_labeler`, simulated profile `careful` | accurate on gender, age, race, profession; abstains on religion, culture and disability when it may; 2% of its outputs are prose (parse failures) |
| `guessing-labeler` | `record_labeler`, simulated profile `guesser` | never abstains: close to careful on visible attributes, guesses on weakly visible ones |
| `clip-zero-shot` | `record_clip_labels` over `SimulatedCosines` | the CLIP zero-shot baseline, SIMULATED: argmax over the templated label prompts, always a label |

The two judges run under the three conditions of runners/conditions/attributes_v1.json,
the published ablations: `default` (label lists and `unspecified`), `no_label_list`
(answers may drift off the taxonomy as free text) and `no_unspecified` (no abstention
option: a forced guess). Their profiles are runners/judges/simulated_labelers.json; the
baseline's are `BASELINE_ACCURACY`. Every number is SIMULATED. Same seed, same content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
from PIL import Image, ImageDraw

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy, load_taxonomy
from audit_core.ingest.pools import PoolSet
from runners.backends.simulated_labeler import simulated_labeler
from runners.demo.datasets import demo_pool_set, read_if_built, written
from runners.labels.clip_labels import (
    DEFAULT_TEMPLATES,
    LabelPrompts,
    ZeroShotLabeler,
    load_label_prompts,
    record_clip_labels,
)
from runners.labels.recorder import record_labeler

DATASET = "attributes-demo"
SIMULATED_NOTE = ("SIMULATED attribute demo: drawn people images, gold labels and attribute judges "
                  "(not real model or human data)")
GENERATORS: tuple[str, ...] = ("sim-gen-a", "sim-gen-b", "sim-gen-c")
CONDITIONS: tuple[str, ...] = ("default", "no_label_list", "no_unspecified")
VISIBLE: tuple[str, ...] = ("gender", "age", "profession")
WEAK: tuple[str, ...] = ("religion", "culture", "disability")
SIZE = 96
COAT = {"doctor": (245, 245, 245), "engineer": (235, 140, 40), "janitor": (90, 110, 150), "lawyer": (40, 40, 60),
        "nurse": (60, 170, 160), "teacher": (80, 150, 70)}
BACKGROUNDS = ((226, 232, 240), (240, 232, 220), (224, 240, 226))
DEMO_LABELERS: tuple[tuple[str, str], ...] = (
    # judge name, simulated profile (runners/judges/simulated_labelers.json); each runs under CONDITIONS
    ("careful-labeler", "careful"),
    ("guessing-labeler", "guesser"),
)
BASELINE = "clip-zero-shot"
BASELINE_MODEL = "SIMULATED CLIP zero-shot (argmax over label prompts)"
# The simulated baseline's chance of "seeing" the gold label, per attribute ('*': the others).
BASELINE_ACCURACY: dict[str, float] = {"gender": 0.85, "age": 0.6, "profession": 0.65, "race": 0.5, "*": 0.2}
COSINE_BASE, COSINE_GAP, COSINE_NOISE = 0.2, 0.03, 0.003
JUDGES: tuple[str, ...] = (*(judge for judge, _ in DEMO_LABELERS), BASELINE)
# The simulated labelers answer in microseconds: calls go to the engine in batches this large, so the
# demo commits a few large batches rather than many small ones (a quarter less CPU time, measured).
BATCH_SIZE = 120


@dataclass(frozen=True)
class SimulatedCosines:
    """A SIMULATED stand-in for CLIP's image–prompt cosines (`runners.backends.clip.zero_shot_classifier`).

    For each image and attribute it "sees" the gold label with probability
    BASELINE_ACCURACY[attribute], else one of the other labels uniformly; a prompt's cosine is
    COSINE_BASE + COSINE_GAP · [the prompt names a seen label] + N(0, COSINE_NOISE²). The gap is
    ten noise deviations, so the argmax over an attribute's labels is the seen label. Draws are
    seeded by (seed, candidate id), so the same seed gives the same scores wherever the images lie.
    """

    candidate_of: dict[str, str]  # image path -> candidate id
    gold: dict[str, dict[str, str]]  # candidate id -> attribute -> gold label (the simulation's peek)
    prompts: LabelPrompts
    seed: int

    def revision(self) -> str:
        return f"SIMULATED cosines (runners/demo/attributes.py, seed {self.seed})"

    def __call__(self, paths: Sequence[str]) -> list[list[float]]:
        columns = {p: i for i, p in enumerate(self.prompts.flat())}
        rows = []
        for path in paths:
            cid = self.candidate_of[path]
            rng = np.random.default_rng([self.seed, 4, int.from_bytes(hashlib.sha256(cid.encode()).digest()[:4],
                                                                      "little")])
            row = COSINE_BASE + rng.normal(0, COSINE_NOISE, len(columns))
            for attribute, labels in self.prompts.prompts.items():
                truth = self.gold.get(cid, {}).get(attribute)
                others = [label for label in labels if label != truth] or list(labels)
                sees_truth = truth in labels and rng.random() < _rate(BASELINE_ACCURACY, attribute)
                seen = truth if sees_truth else others[int(rng.integers(len(others)))]
                for prompt in labels[seen]:
                    row[columns[prompt]] += COSINE_GAP
            rows.append(row.tolist())
        return rows


def _rate(rates: dict[str, float], attribute: str) -> float:
    return rates.get(attribute, rates["*"])


def draw_person(gold: dict[str, str], taxonomy: Taxonomy, seed: int, style: int) -> Image.Image:
    """A SIZE×SIZE figure: coat colour and a tool mark show the profession, hair the gender, size and
    grey hair the age; religion, culture and disability only as a faint mark in a corner."""
    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (SIZE, SIZE), BACKGROUNDS[style % len(BACKGROUNDS)])
    pen = ImageDraw.Draw(image)
    scale = {"child": 0.6, "young adult": 0.95, "middle-aged": 1.0, "elderly": 0.9}[gold["age"]]
    cx, top = SIZE // 2 + int(rng.integers(-8, 9)), int(SIZE * (1 - 0.85 * scale))
    head = int(11 * scale)
    hair = (200, 200, 200) if gold["age"] == "elderly" else (60, 40, 30)
    if gold["gender"] == "female":
        pen.rectangle((cx - head - 2, top, cx + head + 2, top + 3 * head), fill=hair)
    pen.ellipse((cx - head, top + 2, cx + head, top + 2 + 2 * head), fill=(205, 170, 140))
    pen.pieslice((cx - head, top, cx + head, top + 2 * head), 180, 360, fill=hair)
    pen.rectangle((cx - 2 * head, top + 2 * head + 4, cx + 2 * head, SIZE - 2), fill=COAT[gold["profession"]])
    tool = taxonomy.attribute("profession").labels.index(gold["profession"])
    pen.rectangle((cx + head // 2, top + 3 * head, cx + head // 2 + 6, top + 3 * head + 6 + 2 * tool),
                  fill=(200, 30, 30))
    # the weakly visible attributes: one faint mark per attribute, low contrast
    base = np.array(BACKGROUNDS[style % len(BACKGROUNDS)])
    for k, name in enumerate(WEAK):
        index = taxonomy.attribute(name).labels.index(gold[name])
        shade = tuple(int(v) for v in np.clip(base - 6 - 2 * index, 0, 255))
        pen.ellipse((3 + 9 * k, 3, 8 + 9 * k, 8), fill=shade)
    return image


def build_attribute_pools(n_prompts: int, seed: int, image_dir: Path, taxonomy: Taxonomy) -> PoolSet:
    """Prompts (a person in a profession), three drawn candidates each and their gold labels."""
    rng = np.random.default_rng([seed, 2])  # a stream of its own: the other demos' draws stay as they were
    image_dir.mkdir(parents=True, exist_ok=True)
    professions = taxonomy.attribute("profession").labels
    prompts, candidates, gold_rows = [], [], []
    for i in range(n_prompts):
        profession = professions[i % len(professions)]
        article = "an" if profession[0] in "aeiou" else "a"
        text = f"A portrait of {article} {profession} at work" + (f" (scene {i // len(professions) + 1})"
                                                          if i >= len(professions) else "")
        pid = hashlib.sha256(f"{DATASET}:{seed}:{i}:{text}".encode()).hexdigest()[:16]
        prompts.append({"prompt_id": pid, "prompt": text, "country": None, "category": profession, "split": "demo"})
        for k, generator in enumerate(GENERATORS):
            cid = f"{pid}_{k}"
            gold = {a.name: a.labels[int(rng.integers(0, len(a.labels)))] for a in taxonomy.attributes}
            gold["profession"] = profession if rng.random() < 0.85 else gold["profession"]
            path = image_dir / f"{cid}.png"
            draw_person(gold, taxonomy, seed=int(rng.integers(0, 2**31)), style=k).save(path)
            candidates.append({"prompt_id": pid, "candidate_id": cid, "source_model": generator,
                               "image_path": str(path.resolve())})
            gold_rows += [{"candidate_id": cid, "attribute": name, "label": label} for name, label in gold.items()]
    return demo_pool_set(DATASET, seed, SIMULATED_NOTE, taxonomy=taxonomy, prompts=prompts, candidates=candidates,
                         gold_labels=gold_rows)


def record_simulated_judges(con: duckdb.DuckDBPyConnection, seed: int, *, progress: bool = False) -> None:
    """Record the two simulated labelers under every condition (`record_labeler`, backend simulated) and the
    simulated CLIP baseline (`record_clip_labels` over `SimulatedCosines`), as real judges are recorded."""
    gold = store.load_gold_labels(con, DATASET)
    for judge, profile in DEMO_LABELERS:
        record_labeler(con, dataset=DATASET, judge=judge, backend=simulated_labeler(profile, gold),
                       backend_name="simulated", model=profile, conditions=CONDITIONS, batch_size=BATCH_SIZE,
                       progress=progress, config={"simulated": True})
    candidates = store.load_candidates(con, DATASET)
    by_image: dict[str, dict[str, str]] = {}
    for cid, attribute, label in zip(gold["candidate_id"], gold["attribute"], gold["label"]):
        by_image.setdefault(cid, {})[attribute] = label
    prompts = load_label_prompts(DEFAULT_TEMPLATES, load_taxonomy())
    cosines = SimulatedCosines(dict(zip(candidates["image_path"], candidates["candidate_id"])), by_image, prompts,
                               seed)
    record_clip_labels(con, dataset=DATASET, judge=BASELINE,
                       backend=ZeroShotLabeler(cosines, prompts, cosines.revision()), model=BASELINE_MODEL,
                       weights=None, progress=progress,
                       config={"simulated": True, "accuracy": BASELINE_ACCURACY, "seed": seed})


def expected_calls(n_prompts: int) -> int:
    """Calls the demo records: one per image × condition of each labeler, one per image of the baseline."""
    return n_prompts * len(GENERATORS) * (len(DEMO_LABELERS) * len(CONDITIONS) + 1)


def is_built(db: Path, seed: int, n_prompts: int) -> bool:
    """True when `db` holds the attribute demo for this seed and size with every judge's calls."""
    found = read_if_built(db, DATASET, seed, lambda con: (
        len(store.load_prompts(con, DATASET)),
        con.execute("SELECT count(*) FROM label_calls JOIN runs USING (run_id) WHERE dataset_id = ?",
                    [DATASET]).fetchone()[0]))
    return found is not None and found == (n_prompts, expected_calls(n_prompts))


def build_attribute_demo(db: Path, *, n_prompts: int = 40, seed: int = 0, progress: bool = False) -> None:
    """Write the attribute demo's pools and gold labels into `db` (replacing an earlier one), then
    record every simulated judge."""
    taxonomy = load_taxonomy()
    pools = build_attribute_pools(n_prompts, seed, db.parent / f"{db.stem}_images" / DATASET, taxonomy)
    with written(db, pools) as con:
        record_simulated_judges(con, seed, progress=progress)
