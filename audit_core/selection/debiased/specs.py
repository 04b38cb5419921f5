"""The debiased selectors as policies of the selection audit (kind DEBIASED_KIND): per judge with K ≥ 2
orders `{judge} borda`, `{judge} calibrated` and `{judge} plackett-luce`, and `{judge} prior-corrected`
when some call of the judge recorded label probabilities. Each is computed with its defaults (folds,
ridge, calibration fraction) from the judge's calls alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from audit_core.selection.debiased.borda import borda_picks
from audit_core.selection.debiased.calibrated import calibrated_picks
from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.names import BORDA, CALIBRATED, PLACKETT_LUCE, PRIOR_CORRECTED, policy_name
from audit_core.selection.debiased.plackett_luce import plackett_luce_fit
from audit_core.selection.debiased.prior_corrected import prior_corrected_picks
from audit_core.selection.policies import PolicySpec
from audit_core.stats.bootstrap import WORKERS

DEBIASED_KIND = "debiased"


def debiased_specs(calls: OrderedCalls) -> list[PolicySpec]:
    """The judge's debiased policies (module docstring), in METHODS order; orders = K."""
    k, judge = calls.n_orders, calls.judge
    picks = {}
    if k >= 2:
        picks = {BORDA: borda_picks(calls).pick, CALIBRATED: calibrated_picks(calls).pick,
                 PLACKETT_LUCE: plackett_luce_fit(calls).pick}
    if calls.has_label_probs.any():
        picks[PRIOR_CORRECTED] = prior_corrected_picks(calls).pick
    return [PolicySpec(policy_name(judge, method), DEBIASED_KIND, judge, pick, orders=k)
            for method, pick in picks.items()]


def with_debiased(specs: list[PolicySpec], ordered: Mapping[str, OrderedCalls]) -> list[PolicySpec]:
    """`specs` with each judge's debiased policies right after its `{judge} majority`; the judges' fits run
    on `bootstrap.WORKERS` threads (each from its own calls alone, so the same picks in any order)."""
    judges = [spec.base_judge for spec in specs if spec.kind == "majority" and spec.base_judge in ordered]
    with ThreadPoolExecutor(max(1, min(WORKERS, len(judges)))) as pool:
        debiased = dict(zip(judges, pool.map(lambda judge: debiased_specs(ordered[judge]), judges)))
    out = []
    for spec in specs:
        out.append(spec)
        if spec.kind == "majority" and spec.base_judge in debiased:
            out += debiased[spec.base_judge]
    return out
