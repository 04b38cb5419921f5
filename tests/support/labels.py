"""A small dataset for attribute judges: tiny pools with a gold label per image and attribute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from audit_core.attributes.taxonomy import Taxonomy, load_taxonomy
from audit_core.ingest.pools import PoolSet, write_dataset
from tests.support.pools import make_pool_set

WEAK = ("religion", "culture", "disability")  # the weakly visible attributes of the default taxonomy


def write_label_dataset(db: Path, image_dir: Path, *, n_prompts: int = 4, pool_sizes: tuple[int, ...] = (3, 4),
                        taxonomy: Taxonomy | None = None) -> PoolSet:
    """Tiny pools with a gold label per image and attribute of `taxonomy` (the default); a weakly visible
    attribute's gold label is the abstention label on every fourth image."""
    taxonomy = taxonomy or load_taxonomy()
    pools = make_pool_set(image_dir, n_prompts=n_prompts, pool_sizes=pool_sizes)
    rng = np.random.default_rng(3)
    rows = []
    for i, cid in enumerate(pools.candidates["candidate_id"]):
        for a in taxonomy.attributes:
            label = a.abstain if a.name in WEAK and i % 4 == 0 else a.labels[int(rng.integers(len(a.labels)))]
            rows.append({"candidate_id": cid, "attribute": a.name, "label": label})
    pools.gold_labels = pd.DataFrame(rows)
    pools.taxonomy = taxonomy
    write_dataset(db, pools)
    return pools
