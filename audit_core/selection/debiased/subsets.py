"""Which prompts play which part, chosen by a fixed rule from their ids (`hashing.id_hash`).

- folds: fold(p) = id_hash(prompt id, "fold") mod F. The calibrated policy estimates the slot
  prior of fold f's prompts on the other folds' calls (cross-fitting), so no prompt's calls set
  its own prior.
- calibration subset: p is in it iff id_hash(prompt id, "calibration") / 2⁶⁴ < f, so about a
  fraction f of the prompts (each independently), the same prompts whatever else is in the dataset.
"""

from __future__ import annotations

import numpy as np

from audit_core.stats.id_hash import id_hashes

DEFAULT_FOLDS = 5
DEFAULT_CALIBRATION_FRACTION = 0.2


def folds(prompt_ids: np.ndarray, n_folds: int = DEFAULT_FOLDS) -> np.ndarray:
    """(P,) fold of each prompt in 0..n_folds−1: id_hash(prompt id, "fold") mod n_folds."""
    if n_folds < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, got {n_folds}")
    return (id_hashes(prompt_ids, "fold") % np.uint64(n_folds)).astype(np.int64)


def calibration_subset(prompt_ids: np.ndarray, fraction: float = DEFAULT_CALIBRATION_FRACTION) -> np.ndarray:
    """(P,) True for the prompts of the calibration subset: id_hash(prompt id, "calibration") / 2⁶⁴ < fraction."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"the calibration fraction must be in (0, 1], got {fraction}")
    return id_hashes(prompt_ids, "calibration").astype(np.float64) / 2.0**64 < fraction
