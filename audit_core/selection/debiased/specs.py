"""The debiased selectors as policies of the selection audit (kind DEBIASED_KIND): per judge with K ≥ 2
orders `{judge} borda`, `{judge} calibrated` and `{judge} plackett-luce`, and `{judge} prior-corrected`
when some call of the judge recorded label probabilities. Each is computed with its defaults (folds,
ridge, calibration fraction) from the judge's calls alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from audit_core.selection.debiased.borda import borda_picks
from audit_core.selection.debiased.calibrated import calibrated_picks
from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.names import (
    BORDA,
    CALIBRATED,
    METHODS,
    PLACKETT_LUCE,
    PRIOR_CORRECTED,
    policy_name,
)
from audit_core.selection.debiased.plackett_luce import plackett_luce_fit
from audit_core.selection.debiased.prior_corrected import prior_corrected_picks
from audit_core.selection.policies import PolicySpec

DEBIASED_KIND = "debiased"


def debiased_picks(calls: OrderedCalls, methods: Sequence[str] = METHODS) -> dict[str, np.ndarray]:
    """Method -> (P,) picks of the judge's debiased policies (module docstring) among `methods`, in METHODS order."""
    picks = {}
    if calls.n_orders >= 2:
        fits = {BORDA: lambda: borda_picks(calls).pick, CALIBRATED: lambda: calibrated_picks(calls).pick,
                PLACKETT_LUCE: lambda: plackett_luce_fit(calls).pick}
        picks = {method: fit() for method, fit in fits.items() if method in methods}
    if PRIOR_CORRECTED in methods and calls.has_label_probs.any():
        picks[PRIOR_CORRECTED] = prior_corrected_picks(calls).pick
    return picks


def debiased_specs(calls: OrderedCalls, picks: Mapping[str, np.ndarray] | None = None) -> list[PolicySpec]:
    """The judge's debiased policies (module docstring), in METHODS order; orders = K. `picks`: their
    `debiased_picks`, computed here when not given."""
    picks = debiased_picks(calls) if picks is None else picks
    return [PolicySpec(policy_name(calls.judge, method), DEBIASED_KIND, calls.judge, picks[method],
                       orders=calls.n_orders) for method in METHODS if method in picks]


def with_debiased(specs: list[PolicySpec], ordered: Mapping[str, OrderedCalls],
                  picks: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> list[PolicySpec]:
    """`specs` with each judge's debiased policies right after its `{judge} majority`; `picks` (judge ->
    method -> picks, in METHODS order) when the caller made them (a partition's, under the study's fits:
    `partitioned.worker`), else made here.

    The judges' Plackett–Luce fits, one after the other, run on a thread of their own while this one
    makes the other methods' picks: each fit holds several times the judge's calls (one at a time keeps
    the peak), and every pick comes from its judge's calls alone, so the same in any order."""
    if picks is None:
        picks = _fitted(specs, ordered)
    out = []
    for spec in specs:
        out.append(spec)
        if spec.kind == "majority" and spec.base_judge in picks:
            out += debiased_specs(ordered[spec.base_judge], picks[spec.base_judge])
    return out


def _fitted(specs: list[PolicySpec], ordered: Mapping[str, OrderedCalls]) -> dict[str, dict[str, np.ndarray]]:
    """Judge -> method -> picks of every judge in `ordered` with a majority policy (`with_debiased`)."""
    judges = [spec.base_judge for spec in specs if spec.kind == "majority" and spec.base_judge in ordered]
    others = [method for method in METHODS if method != PLACKETT_LUCE]
    with ThreadPoolExecutor(1) as lane:
        fits = lane.submit(lambda: {judge: debiased_picks(ordered[judge], [PLACKETT_LUCE]) for judge in judges})
        picks = {judge: debiased_picks(ordered[judge], others) for judge in judges}
        for judge, fitted in fits.result().items():
            picks[judge].update(fitted)
    return picks
