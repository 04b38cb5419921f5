"""Reference pools (DESIGN §4b): each pool's consensus, its reliability, and how far pools agree.

A pool is a named group of annotators. Its consensus c_p(i) on item i is its
consensus row where there is one, else the mean of its votes on i. Within a pool,
reliability is Krippendorff's alpha over its votes; between pools, agreement is
the Pearson correlation and mean absolute difference of their consensus values.

    votes      candidate_id, outcome, pool, annotator, value
    consensus  candidate_id, pool, value [, outcome]
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Literal

import numpy as np
import pandas as pd

VOTE_COLUMNS = ("candidate_id", "outcome", "pool", "annotator", "value")
RELIABILITY_COLUMNS = ("pool", "outcome", "alpha_ordinal", "alpha_interval", "n_items", "n_annotators")
AGREEMENT_COLUMNS = ("pool_a", "pool_b", "n", "pearson", "mean_abs_diff")


def require_columns(frame: pd.DataFrame, name: str, columns: Sequence[str]) -> None:
    """Raise ValueError naming the frame and every missing column."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {', '.join(missing)} (expected {', '.join(columns)})")


def pool_consensus(
    votes: pd.DataFrame | None = None, consensus: pd.DataFrame | None = None, outcome: str = "rubric"
) -> pd.DataFrame:
    """candidate_id, pool, value: c_p(i) = pool p's consensus row on item i if it has one,
    else the mean of p's votes on i (NaN votes and NaN consensus values count as absent)."""
    if votes is None and consensus is None:
        raise ValueError("give votes, consensus or both: there is no reference to compare ratings with")
    frames = []
    if consensus is not None:
        require_columns(consensus, "consensus", ("candidate_id", "pool", "value"))
        rows = consensus[consensus["outcome"] == outcome] if "outcome" in consensus.columns else consensus
        rows = rows.loc[rows["value"].notna(), ["candidate_id", "pool", "value"]]
        duplicated = rows.duplicated(["candidate_id", "pool"])
        if duplicated.any():
            first = rows[duplicated].iloc[0]
            raise ValueError(f"consensus: two rows for candidate {first['candidate_id']!r} and pool {first['pool']!r}")
        frames.append(rows)
    if votes is not None:
        require_columns(votes, "votes", VOTE_COLUMNS)
        rows = votes[(votes["outcome"] == outcome) & votes["value"].notna()]
        frames.append(rows.groupby(["candidate_id", "pool"], as_index=False, sort=False)["value"].mean())
    combined = pd.concat(frames, ignore_index=True).drop_duplicates(["candidate_id", "pool"], keep="first")
    return combined.astype({"value": float}).sort_values(["candidate_id", "pool"]).reset_index(drop=True)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """corr(x, y); NaN (undefined, not 0) when either side is constant or has fewer than 2 values."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan
    dx, dy = x - x.mean(), y - y.mean()
    return float(np.clip((dx @ dy) / np.sqrt((dx @ dx) * (dy @ dy)), -1.0, 1.0))


def pool_agreement_table(
    votes: pd.DataFrame | None = None, consensus: pd.DataFrame | None = None, outcome: str = "rubric"
) -> pd.DataFrame:
    """One row per pool pair, pool_a < pool_b by name (AGREEMENT_COLUMNS): over the n items
    both pools have a consensus on, pearson of the two consensus values (NaN when either
    side is constant) and mean_abs_diff = mean |c_a − c_b|."""
    values = pool_consensus(votes, consensus, outcome).pivot(index="candidate_id", columns="pool", values="value")
    rows = []
    for a, b in combinations(sorted(values.columns), 2):
        both = values[[a, b]].dropna().to_numpy()
        mean_abs_diff = float(np.abs(both[:, 0] - both[:, 1]).mean()) if len(both) else np.nan
        rows.append((a, b, len(both), pearson(both[:, 0], both[:, 1]), mean_abs_diff))
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS)).astype({"n": int})


def krippendorff_alpha(
    units: np.ndarray, values: np.ndarray, level: Literal["interval", "ordinal"] = "interval"
) -> float:
    """Krippendorff's alpha of votes given as parallel arrays: the unit (item) of each vote and its value.

    α = 1 − D_o / D_e from the coincidence matrix o_ck = Σ_u #(ordered pairs c, k in u) / (m_u − 1)
    over the pairable units (m_u ≥ 2 votes; other votes are ignored) with n pairable values.
    Summing δ² over pairs, Σ_ck o_ck δ²_ck = Σ_u 2 m_u SS_u / (m_u − 1) and Σ_ck n_c n_k δ²_ck
    = 2 n SS, with SS_u and SS the sums of squared deviations within unit u and over all n, so
    α = 1 − (n − 1) Σ_u [m_u SS_u / (m_u − 1)] / (n SS) without building the matrix.
    interval: δ_ck = c − k. ordinal: δ_ck = Σ_{g=c..k} n_g − (n_c + n_k)/2 = R_k − R_c with the
    mid-rank R_c = Σ_{g<c} n_g + n_c / 2 of the pairable values, i.e. interval alpha on R.
    NaN when nothing is pairable or every pairable value is the same. NaN values are missing votes.
    """
    units, values = np.asarray(units), np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    codes, units = np.unique(units[keep], return_inverse=True)
    values = values[keep]
    m = np.bincount(units, minlength=len(codes))
    pairable = m[units] >= 2
    if not pairable.any():
        return np.nan
    x, u = values[pairable], units[pairable]
    if level == "ordinal":
        _, index, counts = np.unique(x, return_inverse=True, return_counts=True)
        x = (np.cumsum(counts) - counts / 2)[index]
    elif level != "interval":
        raise ValueError(f"level {level!r}: expected 'interval' or 'ordinal'")
    m_u = np.bincount(u)
    present = m_u > 0
    mean_u = np.bincount(u, weights=x) / np.where(present, m_u, 1)
    ss_u = np.bincount(u, weights=(x - mean_u[u]) ** 2)
    within = (m_u[present] * ss_u[present] / (m_u[present] - 1)).sum()
    n, ss = len(x), ((x - x.mean()) ** 2).sum()
    if ss <= 0:
        return np.nan
    return float(1 - (n - 1) * within / (n * ss))


def reliability_table(votes: pd.DataFrame) -> pd.DataFrame:
    """One row per pool × outcome (RELIABILITY_COLUMNS): Krippendorff's alpha with the ordinal
    and interval metrics, over the n_items items with at least two votes (pairable) and the
    n_annotators annotators who cast those votes. An annotator voting twice on an item is an error."""
    require_columns(votes, "votes", VOTE_COLUMNS)
    votes = votes[votes["value"].notna()]
    duplicated = votes.duplicated(["candidate_id", "outcome", "pool", "annotator"])
    if duplicated.any():
        first = votes[duplicated].iloc[0]
        raise ValueError(f"votes: annotator {first['annotator']!r} of pool {first['pool']!r} votes twice on "
                         f"candidate {first['candidate_id']!r} (outcome {first['outcome']!r})")
    rows = []
    for (pool, outcome), group in votes.groupby(["pool", "outcome"], sort=True):
        pairable = group[group.groupby("candidate_id")["value"].transform("size") >= 2]
        units, values = pairable["candidate_id"].to_numpy(), pairable["value"].to_numpy(dtype=float)
        rows.append((pool, outcome, krippendorff_alpha(units, values, "ordinal"),
                     krippendorff_alpha(units, values, "interval"),
                     pairable["candidate_id"].nunique(), pairable["annotator"].nunique()))
    return pd.DataFrame(rows, columns=list(RELIABILITY_COLUMNS)).astype({"n_items": int, "n_annotators": int})
