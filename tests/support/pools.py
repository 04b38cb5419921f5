"""Small pool sets for tests: prompts, PIL-drawn candidate images and ratings.

`write_tiny_dataset` writes one into a DuckDB file through the real ingest path
(`audit_core.ingest.pools.write_dataset`: `write_pools` inside `store.transaction`). Images carry the demo's
content signal (`runners.demo.images.draw_image`), so simulated judges see a
quality that matches the alignment rating.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from audit_core.ingest.pools import PoolSet, write_dataset
from runners.demo.images import draw_image

GENERATORS = ("SD35", "flux", "gpt-image", "imagegen3")


def make_pool_set(
    image_dir: Path,
    *,
    dataset: str = "tiny",
    n_prompts: int = 4,
    pool_sizes: Sequence[int] = (3, 4),
    seed: int = 0,
) -> PoolSet:
    """`n_prompts` prompts; prompt i has pool_sizes[i % len] candidates, images saved in `image_dir`."""
    image_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    prompts, candidates, ratings = [], [], []
    for i in range(n_prompts):
        pid = f"p{i:03d}"
        text = f"A festival scene number {i} in a town square"
        prompts.append({"prompt_id": pid, "prompt": text, "country": ["Japan", "Brazil"][i % 2],
                        "category": "festivals", "split": "test"})
        for j, gen in enumerate(GENERATORS[: pool_sizes[i % len(pool_sizes)]]):
            cid = f"{pid}_{gen}"
            quality = float(rng.choice([0.0, 0.5, 1.0]))
            path = image_dir / f"{cid}.png"
            draw_image(text, quality, seed=seed * 1000 + i * 10 + j, style=j).save(path)
            candidates.append({"prompt_id": pid, "candidate_id": cid, "source_model": gen, "image_path": str(path)})
            ratings.append({"candidate_id": cid, "outcome": "alignment", "pool": "all", "value": quality, "n": 3})
    return PoolSet(
        dataset_id=dataset,
        source=f"tests ({dataset})",
        prompts=pd.DataFrame(prompts),
        candidates=pd.DataFrame(candidates),
        ratings=pd.DataFrame(ratings),
    )


def write_tiny_dataset(db: Path, image_dir: Path, **kwargs: object) -> PoolSet:
    """Build a pool set (see `make_pool_set`) and write it to `db` in one transaction."""
    pools = make_pool_set(image_dir, **kwargs)
    write_dataset(db, pools)
    return pools
