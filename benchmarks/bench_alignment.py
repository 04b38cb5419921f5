"""Benchmark the rating-judge alignment audit: time and peak memory.

    python -m benchmarks.bench_alignment [--items 10000] [--judges 6] [--conditions 10] [--resamples 10000]

Generates (in memory, not timed) a cross-cultural rating study: items of two
cultures in three categories, two annotator pools of five voting 1–5 that agree on
clear items and follow their own culture's norms on contested ones, and judges ×
conditions rating every item (a positivity floor, a tilt toward one pool that the
conditions move, one judge abstaining on ~5% of items, one failing ~1% of parses).
Times `alignment.alignment_tables` (alignment and tilt, breakdowns by anchor, culture
and category) and, separately, the reliability, pool-agreement and Wilcoxon tables.
Prints seconds and the peak resident memory of this process (ru_maxrss).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from audit_core import Resampling
from audit_core.rating import alignment, reliability

CULTURES = ("A", "B")
CATEGORIES = ("food", "festival", "dress")
STATUSES = np.array(["ok", "abstained", "parse_fail"], dtype=object)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rating_study(n_items: int, n_judges: int, n_conditions: int, seed: int = 0) -> dict[str, pd.DataFrame]:
    """votes, ratings and items frames of a generated study (whole columns, no loop per row)."""
    rng = np.random.default_rng(seed)
    ids = np.char.add("item", np.char.zfill(np.arange(n_items).astype(str), 6)).astype(object)
    culture = np.array(CULTURES, dtype=object)[np.arange(n_items) % 2]
    category = np.array(CATEGORIES, dtype=object)[(np.arange(n_items) // 2) % len(CATEGORIES)]
    quality = rng.uniform(1, 5, n_items)
    contested = rng.random(n_items) < 0.4
    own = np.where(culture == "A", 1.0, -1.0)
    votes = []
    for pool, sign in (("pool_a", 1.0), ("pool_b", -1.0)):
        norm = np.where(contested, 1.2 * sign * own, 0.0)
        value = np.clip(np.rint(quality[:, None] + norm[:, None] + rng.normal(0, 0.6, (n_items, 5))), 1, 5)
        votes.append(pd.DataFrame({
            "candidate_id": np.repeat(ids, 5), "outcome": "alignment", "pool": pool,
            "annotator": np.tile([f"{pool}_{k}" for k in range(5)], n_items), "value": value.ravel(),
        }))
    votes = pd.concat(votes, ignore_index=True)
    frames = []
    lean = np.where(contested, 1.2 * own, 0.0)  # pool a's norm; the judges lean toward it
    for j in range(n_judges):
        for k in range(n_conditions):
            toward_a = 0.8 - 0.06 * k  # conditions (personas) move the tilt part of the way
            latent = quality + toward_a * lean + 0.4 + rng.normal(0, 0.7, n_items)
            rating = np.clip(np.rint(np.maximum(latent, 2.6)), 1, 5)  # the positivity floor
            status = np.zeros(n_items, dtype=np.int64)
            if j == 1:
                status[rng.random(n_items) < 0.05] = 1
            if j == 2:
                status[rng.random(n_items) < 0.01] = 2
            frames.append(pd.DataFrame({
                "judge": f"judge{j}", "condition": f"cond{k:02d}", "candidate_id": ids,
                "rating": np.where(status == 0, rating, np.nan), "status": STATUSES[status],
            }))
    ratings = pd.concat(frames, ignore_index=True)
    items = pd.DataFrame({"candidate_id": ids, "culture": culture, "category": category})
    return {"votes": votes, "ratings": ratings, "items": items}


def _timed(label: str, call) -> object:
    started = time.perf_counter()
    out = call()
    print(f"{label:<22}{time.perf_counter() - started:7.2f} s")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_alignment", description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--judges", type=int, default=6)
    parser.add_argument("--conditions", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    study = rating_study(args.items, args.judges, args.conditions, args.seed)
    base_rss = peak_rss_mb()
    print(f"{args.items} items x {args.judges} judges x {args.conditions} conditions x 2 pools, "
          f"{len(study['ratings'])} ratings, {len(study['votes'])} votes, {args.resamples} resamples")
    tables = _timed("alignment + tilt", lambda: alignment.alignment_tables(
        study["ratings"], votes=study["votes"], items=study["items"], outcome="alignment",
        resampling=Resampling(args.resamples, args.seed)))
    _timed("reliability", lambda: reliability.reliability_table(study["votes"]))
    _timed("pool agreement", lambda: reliability.pool_agreement_table(study["votes"]))
    _timed("paired Wilcoxon", lambda: alignment.paired_wilcoxon(study["ratings"], votes=study["votes"]))
    print(f"rows: alignment {len(tables.alignment)}, tilt {len(tables.tilt)}")
    print(f"peak RSS {peak_rss_mb():8.0f} MB (after generating the study: {base_rss:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
