"""A judge's slot prior: how often it picks each slot, per pool size, from a set of prompts' calls.

π(s | m) = (c(s, m) + 1) / (n(m) + m), where n(m) counts the calls that returned a pick among the
chosen prompts with pool size m and c(s, m) those of them picking slot s. The add-one (Laplace)
smoothing keeps every π above 0, so dividing by it stays finite when a slot was never picked in the
estimation set, and gives the uniform 1/m when that set has no call of pool size m.

The counts c(s, m) add up over any split of the prompts (`slot_counts`, `fold_counts`), so a prior of
a study held in partitions is `prior_from_counts` of the partitions' summed counts: the same numbers,
since counts are whole numbers summed exactly in float64.
"""

from __future__ import annotations

import numpy as np

from audit_core.selection.debiased.calls import OrderedCalls, prompt_chunks


def slot_counts(calls: OrderedCalls, prompts: np.ndarray) -> np.ndarray:
    """(M + 1, M) c[m, s]: the calls of `prompts` ((P,) bool) with pool size m that picked slot s."""
    return fold_counts(calls, np.where(prompts, 0, 1), 2)[0]


def fold_counts(calls: OrderedCalls, fold: np.ndarray, n_folds: int, width: int | None = None) -> np.ndarray:
    """(F, M + 1, M) c[f, m, s]: `slot_counts` of each fold's prompts (`fold` (P,) in 0..F−1), in one pass
    over the calls, a chunk of prompts at a time; M = `width` when given (a partition's calls may hold
    smaller pools than the study's largest), else the calls' own."""
    width = calls.width if width is None else width
    counts = np.zeros((n_folds, width + 1, width))
    for rows in prompt_chunks(calls.n_prompts):
        slots = calls.rows(rows).pick_slots
        sizes = np.broadcast_to(calls.pool_sizes[rows, None], slots.shape)
        folds = np.broadcast_to(fold[rows, None], slots.shape)
        used = slots >= 0
        np.add.at(counts, (folds[used], sizes[used], slots[used]), 1.0)
    return counts


def prior_from_counts(counts: np.ndarray) -> np.ndarray:
    """(…, M + 1, M) π[m, s] = (c[m, s] + 1) / (Σ_s c[m, s] + m) of counts (…, M + 1, M); 0 where s ≥ m."""
    width = counts.shape[-1]
    m = np.arange(width + 1)[:, None]
    offered = np.arange(width)[None, :] < m
    with np.errstate(invalid="ignore", divide="ignore"):
        prior = (counts + 1.0) / (counts.sum(axis=-1, keepdims=True) + m)
    return np.where(offered, prior, 0.0)


def slot_prior(calls: OrderedCalls, prompts: np.ndarray) -> np.ndarray:
    """(M + 1, M) π[m, s] estimated on the calls of `prompts` ((P,) bool); 0 where s ≥ m."""
    return prior_from_counts(slot_counts(calls, prompts))


def cross_fitted_priors(calls: OrderedCalls, fold: np.ndarray, n_folds: int) -> np.ndarray:
    """(F, M + 1, M) the prior of fold f (`fold` (P,) in 0..F−1) estimated on the calls of every other
    fold's prompts: `prior_from_counts` of all folds' counts minus fold f's own."""
    return out_of_fold_priors(fold_counts(calls, fold, n_folds))


def out_of_fold_priors(counts: np.ndarray) -> np.ndarray:
    """(F, M + 1, M) π_{−f} from each fold's counts c[f] (F, M + 1, M): the prior of Σ_g c[g] − c[f]."""
    return prior_from_counts(counts.sum(axis=0, keepdims=True) - counts)
