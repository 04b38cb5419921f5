"""How a judge behaves across slots and orders: position bias, flips, entropy, generators.

A *valid call* is a recorded call that returned a pick (status ok or recovered).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import chdtrc

from audit_core import metrics
from audit_core.audit_data import AuditData
from audit_core.orders import slot_labels
from audit_core.votes import all_parsed, valid_picks, vote_counts


JUDGE_COLUMNS = [
    "judge", "orders", "calls", "valid", "recovered", "failed", "parse_fail", "runtime_fail",
    "first_slot", "first_slot_uniform", "chi2", "chi2_df", "chi2_p", "flip_n", "flip_rate", "entropy",
]
SLOT_COLUMNS = ["judge", "m", "slot", "share", "uniform", "count"]
GENERATOR_COLUMNS = ["judge", "source_model", "share", "uniform", "count"]
FLIP_COLUMNS = ["judge", "tertile", "range_lo", "range_hi", "prompts", "parsed", "flip_rate"]


def _valid_calls(data: AuditData, judge: str) -> tuple[np.ndarray, np.ndarray]:
    """(mask of valid calls (P, K), pool size per call (P, K))."""
    valid = (data.picks[judge] >= 0) & (data.slots[judge] >= 0)
    sizes = np.broadcast_to(data.pool_sizes[:, None], valid.shape)
    return valid, sizes


def slot_table(data: AuditData, judge: str) -> pd.DataFrame:
    """Share of valid calls choosing each slot, by pool size m and pooled (m = NA).

    Per m: share = count / calls with that m, uniform = 1/m. Pooled: share over all
    valid calls, uniform = mean over valid calls of 1[slot < m]/m (the expectation
    given the pool-size mix).
    """
    valid, sizes = _valid_calls(data, judge)
    slot, m = data.slots[judge][valid], sizes[valid]
    width = data.mask.shape[1]
    rows = []
    for size in np.unique(m):
        chosen = slot[m == size]
        counts = np.bincount(chosen, minlength=size)
        for s in range(size):
            rows.append((judge, int(size), slot_labels(width)[s], counts[s] / len(chosen), 1 / size, int(counts[s])))
    counts = np.bincount(slot, minlength=width)
    expected = expected_slot_counts(m, width)
    for s in range(width):
        share = counts[s] / len(slot) if len(slot) else np.nan
        uniform = expected[s] / len(slot) if len(slot) else np.nan
        rows.append((judge, pd.NA, slot_labels(width)[s], share, uniform, int(counts[s])))
    frame = pd.DataFrame(rows, columns=SLOT_COLUMNS)
    frame["m"] = frame["m"].astype("Int64")
    return frame


def expected_slot_counts(sizes: np.ndarray, width: int) -> np.ndarray:
    """E[count of slot s] under uniform choice = Σ_calls 1[s < m]/m."""
    return np.array([np.sum((s < sizes) / sizes) for s in range(width)], dtype=float)


def slot_chi_square(data: AuditData, judge: str) -> tuple[float, int, float]:
    """Goodness of fit of pooled slot counts to the uniform expectation given pool sizes.

    χ² = Σ_s (O_s − E_s)² / E_s with E_s = Σ_calls 1[s < m]/m; df = slots − 1.
    Returns (χ², df, p); NaN without valid calls.
    """
    valid, sizes = _valid_calls(data, judge)
    width = data.mask.shape[1]
    observed = np.bincount(data.slots[judge][valid], minlength=width).astype(float)
    expected = expected_slot_counts(sizes[valid], width)
    keep = expected > 0
    if keep.sum() < 2:
        return (float("nan"), 0, float("nan"))
    stat = float(np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep]))
    df = int(keep.sum() - 1)
    return (stat, df, float(chdtrc(df, stat)))


def order_entropy(picks: np.ndarray, sizes: np.ndarray, width: int) -> np.ndarray:
    """Normalised order-consistency entropy per prompt: H(picks across orders) / log m.

    0 when every order returns the same image; NaN unless every order parsed.
    """
    counts = vote_counts(picks, width).astype(float)
    p = counts / picks.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=1) / np.log(sizes)
    return np.where(all_parsed(picks), h, np.nan)


def flips(picks: np.ndarray) -> np.ndarray:
    """1 where the returned image differs across orders; NaN unless every order parsed."""
    parsed = all_parsed(picks)
    differs = (picks != picks[:, :1]).any(axis=1)
    return np.where(parsed, differs.astype(float), np.nan)


def generator_table(data: AuditData, judge: str) -> pd.DataFrame:
    """Choice share per generator pooled over orders and prompts vs the uniform expectation.

    share = picks of the generator / valid calls; uniform = mean over valid calls of
    1[generator in pool] / m.
    """
    valid, _ = _valid_calls(data, judge)
    picks = valid_picks(data.picks[judge])
    codes, models = pd.factorize(pd.Series(data.source_models.ravel()), sort=True)
    codes = codes.reshape(data.source_models.shape)
    rows_idx, orders = np.nonzero(valid)
    n = len(rows_idx)
    chosen = np.bincount(codes[rows_idx, picks[rows_idx, orders]], minlength=len(models))
    # expected picks of a generator per call under uniform choice: (copies in pool) / m
    per_prompt = np.zeros((data.n_prompts, len(models)))
    np.add.at(per_prompt, (np.repeat(np.arange(data.n_prompts), codes.shape[1]), codes.ravel()),
              (data.mask / np.maximum(data.pool_sizes, 1)[:, None]).ravel())
    expected = valid.sum(axis=1) @ per_prompt
    rows = [
        (judge, str(model), chosen[i] / n if n else np.nan, expected[i] / n if n else np.nan, int(chosen[i]))
        for i, model in enumerate(models) if model
    ]
    return pd.DataFrame(rows, columns=GENERATOR_COLUMNS)


def flip_by_range(data: AuditData, judge: str) -> pd.DataFrame:
    """Flip rate by tertile of the pool's rating range (h* − min h).

    Tertile bounds are the 1/3 and 2/3 quantiles of the range over all prompts:
    low ≤ q1 < mid ≤ q2 < high. Flip rate among prompts where every order parsed.
    """
    spread = metrics.value_range(data.utility)
    flip = flips(valid_picks(data.picks[judge]))
    q1, q2 = np.nanquantile(spread, [1 / 3, 2 / 3]) if np.isfinite(spread).any() else (np.nan, np.nan)
    bins = {"low": spread <= q1, "mid": (spread > q1) & (spread <= q2), "high": spread > q2}
    bounds = {"low": (np.nanmin(spread), q1), "mid": (q1, q2), "high": (q2, np.nanmax(spread))}
    rows = []
    for name, members in bins.items():
        parsed = members & ~np.isnan(flip)
        n = int(parsed.sum())
        rate = float(flip[parsed].mean()) if n else np.nan
        rows.append((judge, name, *bounds[name], int(members.sum()), n, rate))
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


def judge_summary(data: AuditData, judge: str) -> dict[str, object]:
    """Calls, statuses, first-slot share vs uniform, χ² test, flip rate and entropy.

    calls: recorded calls; valid: calls with a pick; recovered: valid calls the
    lenient adapter recovered; failed: parse or runtime failures. first_slot: share
    of valid calls choosing slot A; first_slot_uniform: mean of 1/m over them.
    flip_rate / entropy: over prompts where every order parsed (flip_n of them).
    """
    status = data.statuses[judge]
    valid, sizes = _valid_calls(data, judge)
    picks = valid_picks(data.picks[judge])
    flip = flips(picks)
    entropy = order_entropy(picks, data.pool_sizes, data.mask.shape[1])
    stat, df, p = slot_chi_square(data, judge)
    n_valid = int(valid.sum())
    slot = data.slots[judge][valid]
    return {
        "judge": judge,
        "orders": picks.shape[1],
        "calls": int((status != "").sum()),
        "valid": n_valid,
        "recovered": int((status == "recovered").sum()),
        "failed": int(np.isin(status, ["parse_fail", "runtime_fail"]).sum()),
        "parse_fail": int((status == "parse_fail").sum()),
        "runtime_fail": int((status == "runtime_fail").sum()),
        "first_slot": float(np.mean(slot == 0)) if n_valid else np.nan,
        "first_slot_uniform": float(np.mean(1 / sizes[valid])) if n_valid else np.nan,
        "chi2": stat,
        "chi2_df": df,
        "chi2_p": p,
        "flip_n": int((~np.isnan(flip)).sum()),
        "flip_rate": float(np.nanmean(flip)) if (~np.isnan(flip)).any() else np.nan,
        "entropy": float(np.nanmean(entropy)) if (~np.isnan(entropy)).any() else np.nan,
    }
