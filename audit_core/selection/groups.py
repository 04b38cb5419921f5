"""Country groups: per-group risk, the worst group and the disparity between groups.

A group where a policy acts on no prompt has zero coverage and an undefined (NaN)
risk: it is reported as such and left out of the worst group and the disparity,
never counted as zero risk.
"""

from __future__ import annotations

import numpy as np

from audit_core.stats.bootstrap import ratio


def worst_group(risk_sum: np.ndarray, acted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Worst-group risk, disparity and groups covered from per-group sums.

    risk_sum, acted: (..., G) sums of a policy's risk and of its acted-on prompts per
    group. Risk_g = risk_sum_g / acted_g over groups with acted_g > 0;
    worst = max_g risk_g; disparity = max_g risk_g − min_g risk_g (NaN when no group is covered).
    """
    risk = ratio(risk_sum, acted)
    covered = (acted > 0).sum(axis=-1)
    worst = np.fmax.reduce(risk, axis=-1)  # fmax/fmin skip NaN (uncovered groups)
    disparity = worst - np.fmin.reduce(risk, axis=-1)
    return worst, disparity, covered


def represented_strata(values: np.ndarray, members: list[np.ndarray]) -> list[np.ndarray]:
    """The defined (non-NaN) values of each group with at least one, groups in the given
    order: what the stratified worst-group bootstrap resamples (`bootstrap.stratified_max`)."""
    strata = [values[rows] for rows in members]
    return [v[~np.isnan(v)] for v in strata if (~np.isnan(v)).any()]
