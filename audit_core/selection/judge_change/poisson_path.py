"""The judge change above `poisson.POISSON_ABOVE` prompts: every interval from one pass of Poisson weights.

`poisson_comparison` makes what `paired.paired_differences` and `verdicts.gate_verdicts` make below the
threshold, the same rows with the same point estimates, its intervals from the Poisson bootstrap (DESIGN
§4f, docs/large-studies.md): prompt p weighs w_pb ~ Poisson(1) in resample b, a function of (seed, prompt
id, b) alone, and every statistic is a ratio of weighted sums over the prompts, the 95% interval the
percentile interval of its B resample values (resamples without a drawn prompt left out):

- a paired difference (a mean of per-prompt differences d over the prompts where both judges define the
  measure): Σ_p w_pb·d_p / Σ_p w_pb over those prompts;
- first_slot over all orders: candidate minus baseline of Σ_p w_pb·slot-A calls / Σ_p w_pb·valid calls,
  over the prompts where both have a valid call, in the same resample;
- a gate's kept or rejected side (per judge): Σ_p w_pb·gain_p / Σ_p w_pb·acted_p over the prompts it
  acts on; kept − rejected the difference of the two sides' ratios in the same resample (the selection
  audit's Poisson path gives a gate these numbers, `partials`).

Every column's weighted sums come from one pass over the prompts (`poisson.PoissonMeans`), a block of
prompts at a time, so memory beyond the per-prompt values stays bounded and the result does not depend on
the prompts' order (within float32 summation, a relative ~1e-6). The gates' picks and per-prompt gains are
the judges' `paired.prompt_values`, computed once for both tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from audit_core.selection.gate_compose import ComposedGate
from audit_core.selection.judge_change.paired import (
    LEVEL,
    Disagreement,
    finished,
    first_slot_calls,
    first_slot_row,
    judge_values,
    paired_cells,
)
from audit_core.selection.judge_change.pairing import ROLES, JudgePair, gate_label
from audit_core.selection.judge_change.verdicts import VerdictRule, verdict_frame, verdict_row
from audit_core.selection.policy_rows import side_differences
from audit_core.stats.bootstrap import percentile_interval
from audit_core.stats.poisson import PoissonMeans, prompt_keys
from audit_core.stats.resampling import Resampling


def poisson_comparison(pair: JudgePair, gates: Sequence[ComposedGate], resampling: Resampling,
                       rule: VerdictRule) -> tuple[pd.DataFrame, Disagreement, pd.DataFrame]:
    """(compare, disagreement, gates) as `paired_differences` and `gate_verdicts` make them, with the
    intervals of the module docstring."""
    values = judge_values(pair, gates)
    means = PoissonMeans(prompt_keys(pair.data.prompts["prompt_id"]))
    cells = paired_cells(pair, *values, means)
    keep, x = first_slot_calls(pair)
    calls = np.zeros((len(keep), 4))
    calls[keep] = x
    slot_a = [means.add_ratio(calls[:, 2 * k], calls[:, 2 * k + 1]) for k in range(2)]  # baseline, candidate
    sides = []  # (gate label, role, the cells of its kept and its rejected side's gain)
    for label in (gate_label(gate) for gate in gates):
        for role, own in zip(ROLES, values):
            sides.append((label, role, means.add(own[label]["gain"]), means.add(own[f"{label} rejected"]["gain"])))

    samples = means.samples(resampling)
    (lo, hi), = means.intervals(resampling, (LEVEL,))
    estimate = means.means()
    first = first_slot_row(x, *_interval(samples[:, slot_a[1]] - samples[:, slot_a[0]], resampling))
    compare, disagreement = finished(cells, first, estimate, lo, hi)
    rows = []
    for label, role, kept, rejected in sides:
        own = values[ROLES.index(role)]
        columns = [c for name in (label, f"{label} rejected") for c in _side_columns(own[name])]
        n_kept, n_rejected = (int((~np.isnan(own[name]["gain"])).sum()) for name in (label, f"{label} rejected"))
        difference = side_differences(np.column_stack(columns).sum(axis=0, keepdims=True), 1)[0, 0]  # as the audit
        rows.append(verdict_row(
            label, pair.judge(role), role, n_kept / pair.data.n_prompts,
            {"kept": (n_kept, estimate[kept], lo[kept], hi[kept]),
             "rejected": (n_rejected, estimate[rejected], lo[rejected], hi[rejected])},
            (float(difference), *_interval(samples[:, kept] - samples[:, rejected], resampling)), rule))
    return compare, disagreement, verdict_frame(rows)


def _side_columns(values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """A gate side's acted, gain and regret per prompt, 0 where it does not act (the audit's layout)."""
    return [(~np.isnan(values["gain"])).astype(float), np.nan_to_num(values["gain"]), np.nan_to_num(values["regret"])]


def _interval(samples: np.ndarray, resampling: Resampling) -> tuple[float, float]:
    """The LEVEL percentile interval of resample values (NaN ones left out); NaNs with 0 resamples."""
    if resampling.resamples == 0:
        return float("nan"), float("nan")
    (lo,), (hi,) = percentile_interval(samples, LEVEL)
    return float(lo), float(hi)
