"""Prompt-level measures of a returned image (DESIGN §4), as pure array functions.

Inputs are (P, M) matrices of candidate values (NaN in padding or where unrated)
and (P,) canonical picks (−1 = abstain). Outputs are (P,) arrays, NaN where the
policy abstains or the picked value is missing; averaging over the acted-on
prompts is the caller's business (`audit_core.selection.audit`).

Ties: comparisons use a tolerance of 1e-12 so that equal ratings count as equal
(a pick tied with the best counts as best; a pick equal to the mean is not below it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

TOL = 1e-12
MARGIN = 0.05


def picked(values: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """values[p, pick[p]]; NaN where pick[p] < 0."""
    rows = np.arange(len(pick))
    out = values[rows, np.clip(pick, 0, None)].astype(float)
    out[pick < 0] = np.nan
    return out


def random_value(values: np.ndarray) -> np.ndarray:
    """Exact random choice: h̄ = Σ_i h_i / m over the candidates with a value (NaN if none).

    Computed as the expectation under `uniform_choice`, so random's gain is exactly 0.
    """
    present = ~np.isnan(values)
    count = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        weights = present / count[:, None]
    return np.where(count > 0, (np.where(present, values, 0.0) * weights).sum(axis=1), np.nan)


def oracle_value(values: np.ndarray) -> np.ndarray:
    """h* = max_i h_i."""
    filled = np.where(np.isnan(values), -np.inf, values)
    best = filled.max(axis=1) if values.shape[1] else np.full(len(values), -np.inf)
    return np.where(np.isfinite(best), best, np.nan)


def regret(values: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """R = h* − h_pick (≥ 0; 0 for any pick tied with the best)."""
    return oracle_value(values) - picked(values, pick)


def gain_over_random(values: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """G = h_pick − h̄ = (h* − h̄) − R."""
    return picked(values, pick) - random_value(values)


def below_mean(values: np.ndarray, pick: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """B = 1[h_pick < h̄ − margin] as 0/1 floats (NaN where the policy abstains)."""
    chosen = picked(values, pick)
    out = (chosen < random_value(values) - margin - TOL).astype(float)
    out[np.isnan(chosen)] = np.nan
    return out


def below_mean_fraction(values: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """Random's matched below-mean rate: the share of candidates with h_i < h̄ − margin.

    This is E[B] under uniform random choice, not 1[E h < h̄] (which is always 0).
    """
    present = ~np.isnan(values)
    below = (values < random_value(values)[:, None] - margin - TOL) & present
    with np.errstate(invalid="ignore", divide="ignore"):
        return below.sum(axis=1) / present.sum(axis=1)


def is_best(values: np.ndarray, pick: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """1[h_pick ≥ h* − margin] (ties with the best count as best), NaN on abstention."""
    chosen = picked(values, pick)
    out = (chosen >= oracle_value(values) - margin - TOL).astype(float)
    out[np.isnan(chosen)] = np.nan
    return out


def best_fraction(values: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """Random's best rate: the share of candidates with h_i ≥ h* − margin."""
    present = ~np.isnan(values)
    best = (values >= oracle_value(values)[:, None] - margin - TOL) & present
    with np.errstate(invalid="ignore", divide="ignore"):
        return best.sum(axis=1) / present.sum(axis=1)


def value_range(values: np.ndarray) -> np.ndarray:
    """h* − min_i h_i: how much the choice can matter in a pool."""
    filled = np.where(np.isnan(values), np.inf, values)
    return oracle_value(values) - np.where(np.isfinite(filled.min(axis=1)), filled.min(axis=1), np.nan)


def sensitive(values: np.ndarray) -> np.ndarray:
    """A pool is sensitive to an outcome when its value differs across candidates."""
    return value_range(values) > TOL


def wilson_interval(successes: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (NaN, NaN) when n = 0.

    centre = (p + z²/2n) / (1 + z²/n);
    half-width = z·sqrt(p(1−p)/n + z²/4n²) / (1 + z²/n), z = Φ⁻¹(1 − (1−level)/2).
    """
    if n <= 0:
        return (float("nan"), float("nan"))
    z = float(ndtri(1 - (1 - level) / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (float(centre - half), float(centre + half))


def one_hot(pick: np.ndarray, width: int) -> np.ndarray:
    """(P, width) choice distribution of a deterministic pick; an all-zero row abstains."""
    return (pick[:, None] == np.arange(width)[None, :]).astype(float)


def uniform_choice(values: np.ndarray) -> np.ndarray:
    """Exact random choice: probability 1/m on every candidate with a value."""
    present = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(present / present.sum(axis=1, keepdims=True))


def oracle_choice(values: np.ndarray) -> np.ndarray:
    """The oracle: uniform over the candidates tied at h*, so its other outcomes are
    the expectation over the tied best images (no arbitrary tie-break)."""
    best = ~np.isnan(values) & (values >= oracle_value(values)[:, None] - TOL)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(best / best.sum(axis=1, keepdims=True))


@dataclass(frozen=True)
class PoolMeasures:
    """Pool-level quantities every policy is measured against (computed once per dataset).

    indicators: name -> (P, M) 0/1 event per candidate (below, below05, top, near);
    fractions: name -> (P,) share of candidates with the event (random's rate);
    values: outcome -> (P, M) ratings with 0 where unrated; rated: outcome -> (P, M) bool;
    means / sensitive: outcome -> (P,) pool mean and whether it differs across candidates.
    """

    best: np.ndarray
    indicators: dict[str, np.ndarray]
    fractions: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    rated: dict[str, np.ndarray]
    means: dict[str, np.ndarray]
    sensitive: dict[str, np.ndarray]
    overall_best: np.ndarray | None


def pool_measures(outcomes: dict[str, np.ndarray]) -> PoolMeasures:
    """Precompute h̄, h*, the event indicators and their candidate shares for every pool."""
    h = outcomes["alignment"]
    mean, best = random_value(h), oracle_value(h)
    with np.errstate(invalid="ignore"):
        indicators = {
            "bmr": h < mean[:, None] - TOL,
            "bmr05": h < mean[:, None] - MARGIN - TOL,
            "best": h >= best[:, None] - TOL,
            "near_best": h >= best[:, None] - MARGIN - TOL,
        }
    present = ~np.isnan(h)
    count = present.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        fractions = {k: np.where(count > 0, (v & present).sum(axis=1) / count, np.nan) for k, v in indicators.items()}
    return PoolMeasures(
        best=best,
        indicators={k: v.astype(float) for k, v in indicators.items()},
        fractions=fractions,
        values={k: np.nan_to_num(v) for k, v in outcomes.items()},
        rated={k: ~np.isnan(v) for k, v in outcomes.items()},
        means={k: random_value(v) for k, v in outcomes.items()},
        sensitive={k: sensitive(v) for k, v in outcomes.items() if k != "alignment"},
        overall_best=oracle_value(outcomes["overall"]) if "overall" in outcomes else None,
    )


def prompt_stats(pools: PoolMeasures, choice: np.ndarray) -> dict[str, np.ndarray]:
    """Every per-prompt measure of a policy given its choice.

    choice is either (P,) canonical picks (−1 = abstain) of a deterministic policy,
    or a (P, M) choice distribution: random is `uniform_choice`, the oracle
    `oracle_choice`. Each measure is the expectation under the choice, so random's
    below-mean rate is the share of candidates with h_i < h̄, not 0. NaN where the
    policy does not act (abstains, or the chosen image is unrated).

    acted; utility E[h]; regret h* − E[h]; gain E[h] − h̄; random_regret h* − h̄;
    bmr P(h < h̄) and bmr_random (share of candidates below h̄); best P(h ≥ h*)
    and best_random; bmr05 / near_best with a 0.05 margin; for each other outcome o:
    `<o>` (chosen), `<o>_random` (pool mean), `<o>_delta` (0 on insensitive pools),
    `<o>_sensitive`; overall_regret = max overall − E[overall].
    """
    if choice.ndim == 1:
        rows, col = np.arange(len(choice)), np.clip(choice, 0, None)
        acted = (choice >= 0) & pools.rated["alignment"][rows, col]

        def weigh(values: np.ndarray) -> np.ndarray:
            return values[rows, col].astype(float)
    else:
        mass = (choice * pools.rated["alignment"]).sum(axis=1)
        acted = (mass > 0) & np.isclose(choice.sum(axis=1), mass)

        def weigh(values: np.ndarray) -> np.ndarray:
            return (choice * values).sum(axis=1)

    def expect(values: np.ndarray) -> np.ndarray:
        return np.where(acted, weigh(values), np.nan)

    mean = pools.means["alignment"]
    utility = expect(pools.values["alignment"])
    stats = {
        "acted": acted.astype(float),
        "utility": utility,
        "regret": pools.best - utility,
        "gain": utility - mean,
        "random_regret": np.where(acted, pools.best - mean, np.nan),
    }
    for event, indicator in pools.indicators.items():
        stats[event] = expect(indicator)
        stats[f"{event}_random"] = np.where(acted, pools.fractions[event], np.nan)
    for name in pools.sensitive:
        rated = weigh(pools.rated[name])
        value = np.where(acted & np.isclose(rated, 1.0), weigh(pools.values[name]), np.nan)
        stats[name] = value
        stats[f"{name}_random"] = np.where(acted, pools.means[name], np.nan)
        # an insensitive pool offers no choice: its delta is exactly 0, not rounding noise
        stats[f"{name}_delta"] = np.where(pools.sensitive[name], value - pools.means[name], value * 0.0)
        stats[f"{name}_sensitive"] = pools.sensitive[name].astype(float)
    if pools.overall_best is not None:
        stats["overall_regret"] = pools.overall_best - stats["overall"]
    return stats
