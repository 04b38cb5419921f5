"""A rating study for the rating runs' tests: tiny pools with two disagreeing annotator pools, and the
test conditions (`CONDITIONS`) and outcome (`OUTCOME`) the `files` fixture (tests/runners/conftest.py) writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from audit_core.ingest.pools import write_dataset
from tests.support.pools import make_pool_set

OUTCOME = "rubric"  # votes on the rubric's 1-5 scale, declared as their own outcome

CONDITIONS = {
    "version": 1,
    "conditions": {
        "default": {"persona": "", "language": "en"},
        "insider_persona": {"persona": "You grew up in the culture the prompt describes.", "language": "en"},
        "demos_a": {"persona": "", "language": "en", "demonstrations": {"pool": "a", "k": 2}},
        "demos_b": {"persona": "", "language": "en", "demonstrations": {"pool": "b", "k": 2}},
    },
}


def write_rating_dataset(db: Path, image_dir: Path, *, n_prompts: int = 4, pool_sizes=(3, 4)) -> None:
    """Tiny pools with two annotator pools (a, b; three votes each on 1-5) that disagree on every third item."""
    pools = make_pool_set(image_dir, n_prompts=n_prompts, pool_sizes=pool_sizes)
    rng = np.random.default_rng(1)
    votes = []
    for i, cid in enumerate(pools.candidates["candidate_id"]):
        base_a = int(rng.integers(1, 6))
        base_b = base_a if i % 3 else 6 - base_a
        for pool, base in (("a", base_a), ("b", base_b)):
            for k in range(3):
                value = float(np.clip(base + (rng.integers(-1, 2) if k == 0 else 0), 1, 5))
                votes.append({"candidate_id": cid, "outcome": OUTCOME, "pool": pool, "annotator": f"{pool}{k}",
                              "value": value})
    pools.votes = pd.DataFrame(votes)
    pools.scales = {OUTCOME: (1.0, 5.0)}
    write_dataset(db, pools)
