"""`{judge} prior-corrected`: one order per prompt, its label probabilities divided by the judge's
slot prior (DESIGN §4d; the single-order debiasing of multiple-choice work).

The slot prior π(s | m) (`slot_prior`, add-one smoothed, per pool size) is estimated on the calls,
in all K orders, of the calibration subset: the prompts with id_hash(id, "calibration") / 2⁶⁴ < f
(`subsets.calibration_subset`, default f = 0.2). Every prompt is then decided from its order-0 call
alone: with P(ℓ) the recorded probability of each offered label (0 for a label the record leaves
out), q(ℓ) = (P(ℓ) / π(slot of ℓ | m)) / Σ_ℓ' P(ℓ') / π(slot of ℓ' | m), and the pick is the image
behind the label with the largest q (ties follow `ties.best_of`, no rating). A prompt whose order-0
call recorded no label probabilities (or only zeros) gets NO_PICK, counted as without_probs. Cost:
the calibration prompts are run in all K orders, the others once: 1 + (K − 1)·f calls per prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.slot_prior import slot_prior
from audit_core.selection.debiased.subsets import DEFAULT_CALIBRATION_FRACTION, calibration_subset
from audit_core.selection.debiased.ties import best_of


@dataclass(frozen=True)
class PriorCorrectedPicks:
    """pick: (P,) canonical index or NO_PICK; corrected: (P, M) q per canonical candidate (NaN where
    not computed); prior: (M + 1, M) π[m, s] from the calibration subset; calibration: (P,) the
    subset; without_probs: (P,) order 0 recorded no usable label probabilities."""

    pick: np.ndarray
    corrected: np.ndarray
    prior: np.ndarray
    calibration: np.ndarray
    without_probs: np.ndarray

    def counts(self) -> dict[str, int]:
        """Prompts: calibration (run in all K orders), with_probs (decided), without_probs (NO_PICK)."""
        return {"calibration": int(self.calibration.sum()), "with_probs": int((~self.without_probs).sum()),
                "without_probs": int(self.without_probs.sum())}


def prior_corrected_picks(calls: OrderedCalls, fraction: float = DEFAULT_CALIBRATION_FRACTION,
                          calibration: np.ndarray | None = None, prior: np.ndarray | None = None
                          ) -> PriorCorrectedPicks:
    """The prior-corrected policy's pick per prompt (module docstring); `calibration` ((P,) bool)
    replaces the subset drawn from the ids at `fraction` when given; `prior` ((M + 1, M),
    `slot_prior.prior_from_counts` of the whole study's calibration counts) stands in for the prior of
    these calls alone, when the calls are one partition of a study."""
    subset = calibration_subset(calls.prompt_ids, fraction) if calibration is None else np.asarray(calibration, bool)
    prior = slot_prior(calls, subset) if prior is None else prior
    m = calls.pool_sizes
    shown = calls.slot_order[:, 0, :]
    probs = np.where(shown >= 0, np.nan_to_num(calls.label_probs[:, 0, :], nan=0.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(shown >= 0, probs / prior[m], 0.0)
        total = ratio.sum(axis=1)
        q = ratio / total[:, None]
    usable = calls.has_label_probs[:, 0] & (total > 0)
    corrected = np.full(calls.mask.shape, np.nan)
    p, s = np.nonzero(usable[:, None] & (shown >= 0))
    corrected[p, shown[p, s]] = q[p, s]
    eligible = calls.mask & usable[:, None]
    pick = best_of(corrected, eligible, calls.tie_ranks)
    return PriorCorrectedPicks(pick=pick, corrected=corrected, prior=prior, calibration=subset,
                               without_probs=~usable)
