"""Country groups: per-group risk, the worst group and the disparity between groups.

A group where a policy acts on no prompt has zero coverage and an undefined (NaN)
risk: it is reported as such and left out of the worst group and the disparity,
never counted as zero risk.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from audit_core.bootstrap import ratio


def group_blocks(labels: np.ndarray) -> tuple[np.ndarray, list[str], list[tuple[int, int]]]:
    """Order that sorts prompts by group, the group names (sorted), and each group's [start, end).

    Missing labels form their own group "(none)".
    """
    names = pd.Series(labels, dtype=object).fillna("(none)").astype(str)
    codes, uniques = pd.factorize(names, sort=True)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=len(uniques))
    ends = np.cumsum(counts)
    return order, [str(u) for u in uniques], [(int(e - c), int(e)) for c, e in zip(counts, ends)]


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
