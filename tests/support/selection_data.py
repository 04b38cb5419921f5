"""Hand-built SelectionData for the statistics tests (no database needed).

`make_data` takes utilities (P, M) with NaN padding and per-judge canonical picks
(P, K); slots follow the default rotations (order k shows canonical (s + k) mod m
in slot s), statuses are "ok" where a pick exists and "parse_fail" elsewhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.selection.data import SelectionData

MODELS = ("SD35", "flux", "gpt-image", "imagegen3", "kandinsky")  # up to five candidates per pool


def make_data(
    h: np.ndarray,
    picks: dict[str, np.ndarray] | None = None,
    countries: list[str] | None = None,
    extra: dict[str, np.ndarray] | None = None,
    scores: dict[str, np.ndarray] | None = None,
) -> SelectionData:
    h = np.asarray(h, dtype=float)
    n, width = h.shape
    mask = ~np.isnan(h)
    m = mask.sum(axis=1)
    ids = np.array([f"p{i:03d}" for i in range(n)], dtype=object)
    candidate_ids = np.where(mask, ids[:, None] + "_" + np.array(MODELS[:width], dtype=object)[None, :], "")
    source_models = np.where(mask, np.array(MODELS[:width], dtype=object)[None, :], "")
    prompts = pd.DataFrame({
        "prompt_id": ids,
        "prompt": [f"prompt {i}" for i in range(n)],
        "country": countries or ["A" if i % 2 else "B" for i in range(n)],
        "category": "c",
        "split": "test",
        "m": m,
    })
    slots, statuses, all_picks = {}, {}, {}
    for judge, pick in (picks or {}).items():
        pick = np.asarray(pick, dtype=np.int64).reshape(n, -1)
        k = np.arange(pick.shape[1])[None, :]
        slot = np.where(pick >= 0, (pick - k) % m[:, None], -1)
        all_picks[judge] = pick
        slots[judge] = slot
        statuses[judge] = np.where(pick >= 0, "ok", np.where(pick == -2, "", "parse_fail")).astype(object)
    outcomes = {"alignment": h}
    for name, values in (extra or {}).items():
        outcomes[name] = np.where(mask, np.asarray(values, dtype=float), np.nan)
    return SelectionData(
        dataset_id="test",
        prompts=prompts,
        candidate_ids=candidate_ids,
        source_models=source_models,
        mask=mask,
        outcomes=outcomes,
        picks=all_picks,
        slots=slots,
        statuses=statuses,
        scores={k: np.where(mask, np.asarray(v, dtype=float), np.nan) for k, v in (scores or {}).items()},
    )


def random_data(n: int = 40, n_orders: int = 3, seed: int = 0, judges: tuple[str, ...] = ("a", "b")) -> SelectionData:
    """A random dataset with 3- and 4-image pools, ratings on a 1/6 grid, two judges,
    a scorer and the cultural outcomes; some picks fail."""
    rng = np.random.default_rng(seed)
    m = rng.choice([3, 4], size=n)
    h = np.round(rng.random((n, 4)) * 6) / 6
    h[np.arange(4)[None, :] >= m[:, None]] = np.nan
    picks = {}
    for judge in judges:
        pick = (rng.integers(0, 12, size=(n, n_orders)) % m[:, None]).astype(np.int64)
        pick[rng.random((n, n_orders)) < 0.05] = -1
        picks[judge] = pick
    extra = {
        "stereotype": np.round(rng.random((n, 4)) * 3) / 3,
        "missing_explicit": np.round(rng.random((n, 4)) * 3) / 3,
        "missing_implicit": np.round(rng.random((n, 4)) * 3) / 3,
        "image_quality": rng.random((n, 4)),
        "overall": rng.random((n, 4)),
    }
    countries = [f"c{i % 5}" for i in range(n)]
    return make_data(h, picks, countries, extra, scores={"clip": rng.random((n, 4))})
