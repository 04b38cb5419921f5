"""A policy's row of the policies table from its per-prompt statistics, shared by both bootstrap paths.

`policy_values` names the per-prompt values whose means get intervals, `point_values` those whose
means are point estimates only; a row is built from each value's total and count over the prompts
where it is defined (`point_row`), so the same row comes from whole arrays (below
`poisson.POISSON_ABOVE` prompts) or from sums added up chunk by chunk (above it).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from audit_core.selection import metrics
from audit_core.stats import bootstrap
from audit_core.store.schema import ERROR_OUTCOMES

LEVEL = 0.95
BONFERRONI_LEVEL = 1 - (1 - LEVEL) / len(ERROR_OUTCOMES)
SIDE_OUTCOMES = ("image_quality", "overall")
Sums = Mapping[str, tuple[float, int]]  # value name -> (total, count) over the prompts where it is defined


def policy_values(kind: str, s: Mapping[str, np.ndarray], outcomes: list[str]) -> dict[str, np.ndarray]:
    """Per-prompt values (NaN where undefined) of every policy-level mean with an interval, for a
    policy of `kind` with per-prompt statistics `s` (`metrics.prompt_stats`)."""
    values = {stat: s[stat] for stat in ("utility", "regret", "gain", "best", "random_regret")}
    if kind in ("random", "oracle"):
        values["bmr_boot"] = s["bmr"]  # a deterministic policy's BMR gets a Wilson interval instead
    values["bmr_delta"] = s["bmr"] - s["bmr_random"]
    for outcome in outcomes:
        values[f"{outcome}_delta"] = s[f"{outcome}_delta"]
        if outcome in ERROR_OUTCOMES:
            values[f"{outcome}_sensitive_delta"] = np.where(s[f"{outcome}_sensitive"] > 0, s[f"{outcome}_delta"], np.nan)
    return values


def bonferroni(stat: str) -> bool:
    """Whether `stat` is a cultural-error delta, which also gets a Bonferroni interval."""
    return stat.split("_delta")[0].replace("_sensitive", "") in ERROR_OUTCOMES


def side_differences(sums: np.ndarray, pairs: int) -> np.ndarray:
    """(B, 2·pairs) kept minus rejected (gain, regret) per pair from (B, 6·pairs) sums laid out
    per pair as kept (acted, gain, regret), rejected (acted, gain, regret)."""
    sums = sums.reshape(len(sums), pairs, 2, 3)
    side = bootstrap.ratio(sums[..., 1:], sums[..., :1])
    return (side[:, :, 0] - side[:, :, 1]).reshape(len(sums), -1)


def point_values(s: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-prompt values (NaN where undefined) whose means make a policy's point estimates."""
    acted = s["acted"] > 0
    values = {k: s[k] for k in ("acted", "bmr", "bmr_random", "best_random", "bmr05", "bmr05_random", "near_best",
                                "near_best_random")}
    values["random_utility"] = np.where(acted, s["utility"] - s["gain"], np.nan)
    values["oracle_utility"] = s["utility"] + s["regret"]
    if "overall_regret" in s:
        values["overall_regret"] = s["overall_regret"]
        values["overall_gain"] = s["overall_delta"]
    for outcome in ERROR_OUTCOMES + SIDE_OUTCOMES:
        if outcome in s:
            rated = ~np.isnan(s[f"{outcome}_delta"])
            values[f"{outcome}_rated"] = np.where(rated, 1.0, np.nan)
            values[f"{outcome}_chosen"] = s[outcome]
            values[f"{outcome}_random"] = np.where(rated, s[f"{outcome}_random"], np.nan)
            if outcome in ERROR_OUTCOMES:
                sens = rated & (s[f"{outcome}_sensitive"] > 0)
                values[f"{outcome}_sensitive_rated"] = np.where(sens, 1.0, np.nan)
                values[f"{outcome}_sensitive_chosen"] = np.where(sens, s[outcome], np.nan)
                values[f"{outcome}_sensitive_random"] = np.where(sens, s[f"{outcome}_random"], np.nan)
    return values


def value_sums(values: Mapping[str, np.ndarray]) -> dict[str, tuple[float, int]]:
    """(Σ, count) of each value over its defined entries (np.nansum, so a mean total / count is np.nanmean's)."""
    return {k: (float(np.nansum(v)), int((~np.isnan(v)).sum())) for k, v in values.items()}


def mean_of(sums: Sums, name: str) -> float:
    """total / count of `name`, NaN without defined values."""
    total, count = sums[name]
    return total / count if count else float("nan")


def point_row(name: str, kind: str, fields: Mapping[str, object], sums: Sums, regret_median: float,
              n_prompts: int) -> dict[str, object]:
    """Point estimates that need no resampling from `point_values` sums: counts, random's matched
    values, Wilson interval of the below-mean rate, the sensitivity variants; `fields` are the
    policy's contract fields (base_judge, threshold, orders, partner)."""
    n = int(sums["acted"][0])
    row: dict[str, object] = {"policy": name, "base_judge": fields["base_judge"], "kind": kind,
                              "threshold": fields["threshold"], "orders": fields["orders"],
                              "partner": fields["partner"], "n": n,
                              "coverage": n / n_prompts if n_prompts else float("nan")}
    for key in ("bmr", "random_utility", "oracle_utility", "bmr_random", "best_random"):
        row[key] = mean_of(sums, key)
    row["regret_median"] = regret_median if n else float("nan")
    for key in ("bmr05", "bmr05_random", "near_best", "near_best_random"):
        row[key] = mean_of(sums, key)
    if "overall_regret" in sums:
        row["overall_regret"] = mean_of(sums, "overall_regret")
        row["overall_gain"] = mean_of(sums, "overall_gain")
    deterministic = kind not in ("random", "oracle")
    wilson = metrics.wilson_interval(sums["bmr"][0], n) if deterministic else (np.nan, np.nan)
    row["bmr_wilson_lo"], row["bmr_wilson_hi"] = wilson
    for outcome in ERROR_OUTCOMES + SIDE_OUTCOMES:
        if f"{outcome}_rated" in sums:
            row[f"{outcome}_n"] = sums[f"{outcome}_rated"][1]
            row[f"{outcome}_chosen"] = mean_of(sums, f"{outcome}_chosen")
            row[f"{outcome}_random"] = mean_of(sums, f"{outcome}_random")
            if outcome in ERROR_OUTCOMES:
                row[f"{outcome}_sensitive_n"] = sums[f"{outcome}_sensitive_rated"][1]
                row[f"{outcome}_sensitive_chosen"] = mean_of(sums, f"{outcome}_sensitive_chosen")
                row[f"{outcome}_sensitive_random"] = mean_of(sums, f"{outcome}_sensitive_random")
    return row


def attach_intervals(table: pd.DataFrame, ratio_frame: pd.DataFrame) -> pd.DataFrame:
    """Widen (policy, stat) estimates into stat, stat_lo, stat_hi (and Bonferroni for errors)."""
    wide = {}
    for stat, part in ratio_frame.groupby("stat", sort=False):
        part = part.set_index("policy")
        wide[stat] = part["value"]
        wide[f"{stat}_lo"] = part["lo"]
        wide[f"{stat}_hi"] = part["hi"]
        if bonferroni(stat):
            wide[f"{stat}_lo_bonf"] = part["lo_bonf"]
            wide[f"{stat}_hi_bonf"] = part["hi_bonf"]
    frame = table.join(pd.DataFrame(wide), on="policy")
    deterministic = ~frame["kind"].isin(["random", "oracle"])
    frame["bmr_lo"] = frame["bmr_wilson_lo"].where(deterministic, frame["bmr_boot_lo"])
    frame["bmr_hi"] = frame["bmr_wilson_hi"].where(deterministic, frame["bmr_boot_hi"])
    frame = frame.drop(columns=["bmr_wilson_lo", "bmr_wilson_hi", "bmr_boot", "bmr_boot_lo", "bmr_boot_hi"])
    lead = ["policy", "base_judge", "kind", "threshold", "orders", "partner", "n", "coverage",
            "utility", "utility_lo", "utility_hi", "regret", "regret_lo", "regret_hi",
            "gain", "gain_lo", "gain_hi", "bmr", "bmr_lo", "bmr_hi", "bmr_random",
            "bmr_delta", "bmr_delta_lo", "bmr_delta_hi", "best", "best_lo", "best_hi", "best_random",
            "random_utility", "random_regret", "random_regret_lo", "random_regret_hi", "oracle_utility"]
    return frame[lead + [c for c in frame.columns if c not in lead]]
