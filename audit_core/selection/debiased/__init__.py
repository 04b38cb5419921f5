"""Debiased selectors (DESIGN §4d): policies computed from a judge's recorded calls alone, never from
ratings, that undo its preference for slots.

- `calls`: the calls as dense arrays aligned with `SelectionData` (`load_ordered_calls` from the store,
  `ordered_calls` from the calls frame the audit is given; `OrderedCalls`);
- `borda`, `calibrated`, `plackett_luce`, `prior_corrected`: one policy each, returning its pick per
  prompt and what it counted; `names` builds their policy names (a contract);
- `slot_prior`, `subsets`, `ties`: the slot prior, the folds and calibration subset chosen from prompt
  ids (hashed by `audit_core.stats.id_hash`), and the tie rule that uses no rating;
- `costs`: calls and seconds per prompt of a judge's policies (`audit_core.selection.costs` gives every
  policy of the audit its cost by the same rule);
- `specs`: the debiased policies as policies of the selection audit (kind "debiased", after each
  judge's majority), which `audit_core.selection.audit` evaluates when it is given the calls.

Imports `audit_core.selection.data`, `audit_core.selection.policies`, `audit_core.store` and
`audit_core.errors`; never streamlit, torch or runners.
"""

from audit_core.selection.debiased.borda import BordaPicks, borda_picks, borda_points
from audit_core.selection.debiased.calibrated import CalibratedPicks, calibrated_picks
from audit_core.selection.debiased.calls import ABSENT, OrderedCalls, load_ordered_calls, order0_slots, ordered_calls
from audit_core.selection.debiased.costs import COST_COLUMNS, calls_used, judge_costs, seconds_per_prompt
from audit_core.selection.debiased.names import (
    BORDA,
    CALIBRATED,
    METHODS,
    PLACKETT_LUCE,
    PRIOR_CORRECTED,
    borda_name,
    calibrated_name,
    plackett_luce_name,
    policy_name,
    prior_corrected_name,
)
from audit_core.selection.debiased.plackett_luce import PlackettLuceFit, plackett_luce_fit
from audit_core.selection.debiased.prior_corrected import PriorCorrectedPicks, prior_corrected_picks
from audit_core.selection.debiased.slot_prior import cross_fitted_priors, slot_prior
from audit_core.selection.debiased.subsets import calibration_subset, folds

__all__ = [
    "ABSENT", "BORDA", "CALIBRATED", "COST_COLUMNS", "METHODS", "PLACKETT_LUCE", "PRIOR_CORRECTED", "BordaPicks",
    "CalibratedPicks", "OrderedCalls", "PlackettLuceFit", "PriorCorrectedPicks", "borda_name", "borda_picks",
    "borda_points", "calibrated_name", "calibrated_picks", "calibration_subset", "calls_used", "cross_fitted_priors",
    "folds", "judge_costs", "load_ordered_calls", "order0_slots", "ordered_calls", "plackett_luce_fit",
    "plackett_luce_name", "policy_name", "prior_corrected_name", "prior_corrected_picks", "seconds_per_prompt", "slot_prior",
]
