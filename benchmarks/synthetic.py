"""Generate a large, realistic audit dataset straight into a store (for benchmarks).

    python -m benchmarks.synthetic --db PATH --prompts N [--judges 3] [--orders 3] [--seed 0]

Pools look like CulturalFrames: 10 countries x 5 categories, 3 or 4 candidates
from 4 generators, mean annotator ratings on a 1/12 grid, cultural-error rates as
shares of the 3 annotators (stereotype) or on sixths, image quality and overall
satisfaction: every rating on a grid, as real studies record them. Judges mix a
content signal with a slot prior (a slot-A lover, a nearly unbiased judge, a slot-B lover that sometimes
breaks the format, …) over `n_orders` cyclic rotations; an optional CLIP-like
scorer scores each image alone. Every table is built as whole columns and written
with `audit_core.store.insert_frame`: no Python loop per row.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from audit_core import store
from audit_core.store.records import utc_now

COUNTRIES = ("Brazil", "Canada", "Chile", "China", "Germany", "India", "Iran", "Japan", "Poland", "South_Africa")
CATEGORIES = ("dates-of-significance", "etiquette", "family", "greetings", "religion")
GENERATORS = ("SD35", "flux", "gpt-image", "imagegen3")  # sorted: canonical order = generator order
# (slot prior per slot A..D, content signal, parse-failure rate) per synthetic judge
JUDGE_STYLES = (
    ("slot_a", (1.2, 0.3, 0.1, 0.0), 2.5, 0.0),
    ("steady", (0.1, 0.0, 0.0, 0.0), 5.0, 0.0),
    ("slot_b", (0.6, 1.3, -0.5, -0.8), 1.0, 0.02),
)


def _list_column(values: np.ndarray, lengths: np.ndarray) -> pd.Series:
    """A VARCHAR[] column from flat values and per-row lengths (Arrow-backed, no per-row lists)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))))


def _strings(prefix: str, numbers: np.ndarray, width: int) -> np.ndarray:
    return np.char.add(prefix, np.char.zfill(numbers.astype(str), width)).astype(object)


def build_synthetic_db(
    path: str | Path,
    n_prompts: int = 100_000,
    n_judges: int = 3,
    n_orders: int = 3,
    seed: int = 0,
    scorer: bool = True,
    dataset_id: str | None = None,
) -> str:
    """Write a generated dataset into the store at `path`; returns its dataset id.

    Replaces a dataset of the same id. n_orders ≤ 3 (pools have 3 or 4 images).
    """
    if not 1 <= n_orders <= 3:
        raise ValueError("n_orders must be 1..3: the smallest pools have 3 images")
    if not 1 <= n_judges <= 26:
        raise ValueError("n_judges must be 1..26")
    rng = np.random.default_rng(seed)
    dataset_id = dataset_id or f"synthetic-{n_prompts}"
    width = len(GENERATORS)
    now = utc_now()

    # pools: 1/3 of prompts have 3 images (no imagegen3), like the JudgeActs main split
    m = np.where(rng.random(n_prompts) < 1 / 3, 3, 4)
    prompt_ids = _strings("p", np.arange(n_prompts), 7)
    country = np.array(COUNTRIES, dtype=object)[np.arange(n_prompts) % len(COUNTRIES)]
    category = np.array(CATEGORIES, dtype=object)[(np.arange(n_prompts) // len(COUNTRIES)) % len(CATEGORIES)]
    prompts = pd.DataFrame({
        "dataset_id": dataset_id, "prompt_id": prompt_ids,
        "prompt": np.char.add("a culturally situated scene #", np.arange(n_prompts).astype(str)).astype(object),
        "country": country, "category": category, "split": "synthetic",
    })
    mask = np.arange(width)[None, :] < m[:, None]
    rows, cols = np.nonzero(mask)
    cand_ids = np.char.add(np.char.add(prompt_ids[rows].astype(str), "_"), np.array(GENERATORS)[cols]).astype(object)
    candidates = pd.DataFrame({
        "dataset_id": dataset_id, "prompt_id": prompt_ids[rows], "candidate_id": cand_ids,
        "canonical_index": cols.astype(np.int32), "source_model": np.array(GENERATORS, dtype=object)[cols],
        "image_path": None,
    })

    # ratings: latent quality per image, generator effect, prompt difficulty
    generator_effect = np.array([0.0, -0.3, 0.6, 0.2])
    latent = rng.normal(size=(n_prompts, 1)) * 0.5 + generator_effect[None, :] + rng.normal(size=(n_prompts, width))
    alignment = np.round(12 / (1 + np.exp(-(latent + 0.9)))) / 12
    outcomes = {
        "alignment": alignment,
        # the share of an image's 3 annotators who flag a stereotype, as CulturalFrames records it
        "stereotype": rng.binomial(3, rng.beta(1, 7, size=latent.shape)) / 3,
        "missing_explicit": np.clip(np.round(6 * (1 - alignment) * rng.random(latent.shape)) / 6, 0, 1),
        "missing_implicit": np.clip(np.round(6 * (1 - alignment) * rng.random(latent.shape) * 0.7) / 6, 0, 1),
        "image_quality": np.clip(np.round(12 * (0.75 + 0.15 * rng.normal(size=latent.shape))) / 12, 0, 1),
        "overall": np.clip(np.round(16 * (0.6 * alignment + 0.3 + 0.1 * rng.normal(size=latent.shape))) / 16, 0, 1),
    }
    ratings = pd.concat(
        [pd.DataFrame({"dataset_id": dataset_id, "candidate_id": cand_ids, "outcome": name, "pool": "all",
                       "value": values[rows, cols], "n": 3}) for name, values in outcomes.items()],
        ignore_index=True,
    )

    # orders: canonical, then distinct cyclic shifts 1..K−1
    shifts = np.arange(n_orders)
    runs, calls, scores = [], [], []
    for j in range(n_judges):
        name, prior, signal, fail_rate = JUDGE_STYLES[j % len(JUDGE_STYLES)]
        judge = name if j < len(JUDGE_STYLES) else f"{name}{j // len(JUDGE_STYLES)}"
        run_id = f"{dataset_id}:{judge}"
        runs.append({"run_id": run_id, "dataset_id": dataset_id, "judge": judge, "kind": "selector",
                     "backend": "simulated", "status": "finished", "model": f"synthetic/{name}",
                     "model_revision": None, "instruction_sha256": None, "manifest_sha256": None,
                     "config_json": None, "started_at": now, "finished_at": now})
        p_idx = np.repeat(np.arange(n_prompts), n_orders)
        order = np.tile(shifts, n_prompts)
        size = m[p_idx]
        slot_of = (np.arange(width)[None, :] - order[:, None]) % size[:, None]  # slot showing canonical c
        utility = np.where(mask[p_idx], alignment[p_idx], -np.inf)
        prior_by_slot = np.array(prior)[np.minimum(slot_of, width - 1)]
        # a judge's own view of each image is shared across orders; only a little noise is per call
        opinion = rng.normal(scale=0.6, size=(n_prompts, width))[p_idx]
        score = signal * utility + opinion + prior_by_slot + rng.gumbel(scale=0.3, size=utility.shape)
        pick = score.argmax(axis=1)
        failed = rng.random(len(pick)) < fail_rate
        # canonical index shown in each slot: c = (s + shift) mod m
        slot_canon = (np.arange(width)[None, :] + order[:, None]) % size[:, None]
        shown = np.arange(width)[None, :] < size[:, None]
        cand_row_start = np.concatenate([[0], np.cumsum(m)])[:-1]
        slot_ids = (cand_ids[(cand_row_start[p_idx][:, None] + slot_canon)[shown]])
        chosen_slot = slot_of[np.arange(len(pick)), pick]
        chosen = np.where(failed, None, cand_ids[cand_row_start[p_idx] + pick])
        labels = np.array(list("ABCD"), dtype=object)[chosen_slot]
        calls.append(pd.DataFrame({
            "run_id": run_id, "prompt_id": prompt_ids[p_idx], "order_index": order.astype(np.int32),
            "slot_candidate_ids": _list_column(slot_ids, size), "status": np.where(failed, "parse_fail", "ok"),
            "choice_label": np.where(failed, None, labels), "chosen_candidate_id": chosen, "ranking": None,
            "raw_output": np.where(failed, "I think the second one is best.", None), "parse_note": None,
            "attempts": 1, "seconds": rng.gamma(2.0, 1.5, size=len(pick)), "input_json": None,
            "request_key": np.char.add(f"{run_id}:", np.arange(len(pick)).astype(str)).astype(object),
            "created_at": now,
        }))
    if scorer:
        run_id = f"{dataset_id}:clip"
        runs.append({"run_id": run_id, "dataset_id": dataset_id, "judge": "clip", "kind": "scorer",
                     "backend": "simulated", "status": "finished", "model": "synthetic/clip",
                     "model_revision": None, "instruction_sha256": None, "manifest_sha256": None,
                     "config_json": None, "started_at": now, "finished_at": now})
        cosine = 0.22 + 0.03 * alignment + 0.02 * rng.normal(size=alignment.shape)
        scores.append(pd.DataFrame({"run_id": run_id, "candidate_id": cand_ids, "score": cosine[rows, cols]}))

    con = store.connect(path)
    try:
        with store.transaction(con):
            store.delete_dataset(con, dataset_id)
            store.insert_frame(con, "datasets", pd.DataFrame([{
                "dataset_id": dataset_id, "name": dataset_id, "source": "synthetic",
                "source_revision": f"seed={seed}", "manifest_sha256": "synthetic", "created_at": now,
                "notes": f"generated: {n_prompts} prompts, {n_judges} judges x {n_orders} orders",
            }]))
            store.insert_frame(con, "prompts", prompts)
            store.insert_frame(con, "candidates", candidates)
            store.insert_frame(con, "ratings", ratings)
            store.insert_frame(con, "runs", pd.DataFrame(runs))
            for frame in calls:
                store.insert_frame(con, "calls", frame)
            for frame in scores:
                store.insert_frame(con, "scores", frame)
    finally:
        con.close()
    return dataset_id


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synthetic", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scorer", action="store_true")
    parser.add_argument("--dataset", default=None, help="dataset id (default synthetic-<prompts>)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    dataset = build_synthetic_db(args.db, args.prompts, args.judges, args.orders, args.seed,
                                 not args.no_scorer, args.dataset)
    print(f"wrote dataset {dataset!r} to {args.db} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
