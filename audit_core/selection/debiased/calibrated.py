"""`{judge} calibrated`: each order's pick weighted by the inverse of the judge's probability of
picking that slot (DESIGN §4d).

score(i) = Σ_k 1[order k picked i] / π_{−f(p)}(slot of i in order k | m), where π_{−f} is the slot
prior (`slot_prior`, add-one smoothed, per pool size m) estimated on the calls of the prompts outside
prompt p's fold f(p) (`subsets.folds`, F folds from the prompt ids): no prompt's calls enter its own
prior (cross-fitting). The pick is the argmax; ties follow `ties.best_of` (no rating). Orders without
a pick add nothing; a prompt where none returned a pick gets NO_PICK.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit_core.selection.debiased.calls import OrderedCalls, prompt_chunks
from audit_core.selection.debiased.slot_prior import cross_fitted_priors
from audit_core.selection.debiased.subsets import DEFAULT_FOLDS, folds
from audit_core.selection.debiased.ties import best_of


@dataclass(frozen=True)
class CalibratedPicks:
    """pick: (P,) canonical index or NO_PICK; scores: (P, M) inverse-prior weighted votes (NaN in
    padding); fold: (P,) each prompt's fold; priors: (F, M + 1, M) fold f's prior π_{−f}[m, s];
    partial: (P,) some but not every order returned a pick; abstained: (P,) none did."""

    pick: np.ndarray
    scores: np.ndarray
    fold: np.ndarray
    priors: np.ndarray
    partial: np.ndarray
    abstained: np.ndarray

    def counts(self) -> dict[str, int]:
        """Prompts by how many orders returned a pick: all, partial, abstained (none)."""
        return {"all": int((~self.partial & ~self.abstained).sum()), "partial": int(self.partial.sum()),
                "abstained": int(self.abstained.sum())}


def calibrated_picks(calls: OrderedCalls, n_folds: int = DEFAULT_FOLDS, priors: np.ndarray | None = None
                     ) -> CalibratedPicks:
    """The calibrated policy's pick per prompt (module docstring); the scores a chunk of prompts at a time.
    `priors` ((F, M + 1, M), `slot_prior.out_of_fold_priors` of the whole study's fold counts) stand in for
    the priors of these calls alone, when the calls are one partition of a study."""
    fold = folds(calls.prompt_ids, n_folds)
    priors = cross_fitted_priors(calls, fold, n_folds) if priors is None else priors
    parts = [_scored(calls.rows(rows), fold[rows], priors) for rows in prompt_chunks(calls.n_prompts)]
    pick, scores, partial, abstained = (np.concatenate(column) for column in zip(*parts))
    return CalibratedPicks(pick=pick, scores=scores, fold=fold, priors=priors, partial=partial, abstained=abstained)


def _scored(calls: OrderedCalls, fold: np.ndarray, priors: np.ndarray) -> tuple[np.ndarray, ...]:
    """(pick, scores, partial, abstained) of the calls' prompts, each in fold `fold` with `priors`."""
    slots, valid = calls.pick_slots, calls.valid
    p, k = np.nonzero(valid)
    weight = 1.0 / priors[fold[p], calls.pool_sizes[p], slots[p, k]]
    scores = np.zeros(calls.mask.shape)
    np.add.at(scores, (p, calls.picks[p, k]), weight)
    acted = valid.any(axis=1)
    pick = best_of(scores, calls.mask & acted[:, None], calls.tie_ranks)
    return pick, np.where(calls.mask, scores, np.nan), acted & ~valid.all(axis=1), ~acted
