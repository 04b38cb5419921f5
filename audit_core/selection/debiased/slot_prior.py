"""A judge's slot prior: how often it picks each slot, per pool size, from a set of prompts' calls.

π(s | m) = (c(s, m) + 1) / (n(m) + m), where n(m) counts the calls that returned a pick among the
chosen prompts with pool size m and c(s, m) those of them picking slot s. The add-one (Laplace)
smoothing keeps every π above 0, so dividing by it stays finite when a slot was never picked in the
estimation set, and gives the uniform 1/m when that set has no call of pool size m.
"""

from __future__ import annotations

import numpy as np

from audit_core.selection.debiased.calls import OrderedCalls, prompt_chunks


def slot_prior(calls: OrderedCalls, prompts: np.ndarray) -> np.ndarray:
    """(M + 1, M) π[m, s] estimated on the calls of `prompts` ((P,) bool); 0 where s ≥ m."""
    width = calls.width
    counts = np.zeros((width + 1, width))
    for rows in prompt_chunks(calls.n_prompts):  # a chunk of prompts' calls at a time
        slots = calls.rows(rows).pick_slots
        sizes = np.broadcast_to(calls.pool_sizes[rows, None], slots.shape)
        used = prompts[rows, None] & (slots >= 0)
        np.add.at(counts, (sizes[used], slots[used]), 1.0)
    m = np.arange(width + 1)[:, None]
    offered = np.arange(width)[None, :] < m
    with np.errstate(invalid="ignore", divide="ignore"):
        prior = (counts + 1.0) / (counts.sum(axis=1, keepdims=True) + m)
    return np.where(offered, prior, 0.0)


def cross_fitted_priors(calls: OrderedCalls, fold: np.ndarray, n_folds: int) -> np.ndarray:
    """(F, M + 1, M) the prior of fold f (`fold` (P,) in 0..F−1) estimated on the calls of every other
    fold's prompts."""
    return np.stack([slot_prior(calls, fold != f) for f in range(n_folds)])
