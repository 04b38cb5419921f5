"""How a judge behaves across slots and orders: position bias, flips, entropy, generators.

A *valid call* is a recorded call that returned a pick (status ok or recovered).
Intervals on a group's mean (a flip group, a generator's order-0 picks, the judge's
flip rate) resample that group's values at fixed n with a generator seeded afresh for
every group, as the published study does. The first-slot share is a ratio over calls,
and a prompt's orders travel together: its interval resamples prompts (`first_slot_interval`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.special import chdtrc

from audit_core.selection import metrics
from audit_core.selection.data import SelectionData
from audit_core.selection.debiased.calls import OrderedCalls, prompt_chunks
from audit_core.selection.orders import slot_labels
from audit_core.selection.votes import all_parsed, valid_picks, vote_counts
from audit_core.stats import bootstrap
from audit_core.stats.resampling import Resampling

JUDGE_COLUMNS = [
    "judge", "orders", "calls", "valid", "recovered", "failed", "parse_fail", "runtime_fail",
    "first_slot", "first_slot_uniform", "chi2", "chi2_df", "chi2_p", "flip_n", "flip_rate", "entropy",
    "first_slot_lo", "first_slot_hi", "flip_rate_lo", "flip_rate_hi",
]
SLOT_COLUMNS = ["judge", "m", "slot", "share", "uniform", "count"]
GENERATOR_COLUMNS = [
    "judge", "source_model", "share", "uniform", "count", "count_order0", "share_order0",
    "stereotype_mean", "stereotype_delta", "stereotype_delta_lo", "stereotype_delta_hi", "contribution",
]
GENERATOR_SLOT_COLUMNS = ["judge", "generator", "slot", "presented", "chosen", "rate"]
FLIP_COLUMNS = ["judge", "tertile", "range_lo", "range_hi", "prompts", "parsed", "flip_rate", "flip_rate_lo", "flip_rate_hi"]
NEAR_TIE_COLUMNS = ["judge", "near_ties", "prompts", "parsed", "flip_rate", "flip_rate_lo", "flip_rate_hi"]
TERTILES = ("low", "mid", "high")
NEAR_TIE = 0.05  # a candidate within this of the best rating is a near-tie of it


def _valid_calls(data: SelectionData, judge: str) -> tuple[np.ndarray, np.ndarray]:
    """(mask of valid calls (P, K), pool size per call (P, K))."""
    valid = (data.picks[judge] >= 0) & (data.slots[judge] >= 0)
    sizes = np.broadcast_to(data.pool_sizes[:, None], valid.shape)
    return valid, sizes


def slot_table(data: SelectionData, judge: str) -> pd.DataFrame:
    """Share of valid calls choosing each slot, by pool size m and pooled (m = NA).

    Per m: share = count / calls with that m, uniform = 1/m. Pooled: share over all
    valid calls, uniform = mean over valid calls of 1[slot < m]/m (the expectation
    given the pool-size mix).
    """
    valid, sizes = _valid_calls(data, judge)
    slot, m = data.slots[judge][valid], sizes[valid]
    width = data.mask.shape[1]
    return slot_frame(judge, slot_counts_by_size(slot, m, width), expected_slot_counts(m, width))


def slot_counts_by_size(slot: np.ndarray, sizes: np.ndarray, width: int) -> np.ndarray:
    """(width + 1, width) int64: [m, s] = the valid calls (`slot`, their pool sizes `sizes`) with pool
    size m that chose slot s; counts of prompts held apart add up."""
    cell = np.asarray(sizes, dtype=np.int64) * width + np.asarray(slot, dtype=np.int64)
    return np.bincount(cell, minlength=(width + 1) * width).astype(np.int64).reshape(width + 1, width)


def slot_frame(judge: str, by_size: np.ndarray, expected: np.ndarray) -> pd.DataFrame:
    """`slot_table`'s rows from the valid calls' `slot_counts_by_size` and their `expected_slot_counts`."""
    width = by_size.shape[1]
    rows = []
    for size in np.nonzero(by_size.sum(axis=1))[0]:
        counts, chosen = by_size[size], by_size[size].sum()
        for s in range(size):
            rows.append((judge, int(size), slot_labels(width)[s], counts[s] / chosen, 1 / size, int(counts[s])))
    counts = by_size.sum(axis=0)
    n = int(counts.sum())  # valid calls
    for s in range(width):
        share = counts[s] / n if n else np.nan
        uniform = expected[s] / n if n else np.nan
        rows.append((judge, pd.NA, slot_labels(width)[s], share, uniform, int(counts[s])))
    frame = pd.DataFrame(rows, columns=SLOT_COLUMNS)
    frame["m"] = frame["m"].astype("Int64")
    return frame


def expected_slot_counts(sizes: np.ndarray, width: int) -> np.ndarray:
    """E[count of slot s] under uniform choice = Σ_calls 1[s < m]/m."""
    return np.array([np.sum((s < sizes) / sizes) for s in range(width)], dtype=float)


def slot_chi_square(data: SelectionData, judge: str) -> tuple[float, int, float]:
    """Goodness of fit of pooled slot counts to the uniform expectation given pool sizes.

    χ² = Σ_s (O_s − E_s)² / E_s with E_s = Σ_calls 1[s < m]/m; df = slots − 1.
    Returns (χ², df, p); NaN without valid calls.
    """
    valid, sizes = _valid_calls(data, judge)
    width = data.mask.shape[1]
    observed = np.bincount(data.slots[judge][valid], minlength=width)
    return chi_square_of_counts(observed, expected_slot_counts(sizes[valid], width))


def chi_square_of_counts(observed: np.ndarray, expected: np.ndarray) -> tuple[float, int, float]:
    """`slot_chi_square` of the pooled slot counts `observed` (width,) and their uniform expectation
    `expected` (width,) (`expected_slot_counts`): (χ², df, p) over the slots with E_s > 0."""
    observed = np.asarray(observed).astype(float)
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
    h = np.empty(len(picks))
    for rows in prompt_chunks(len(picks)):  # a chunk of prompts at a time
        p = vote_counts(picks[rows], width).astype(float) / picks.shape[1]
        with np.errstate(divide="ignore", invalid="ignore"):
            h[rows] = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=1) / np.log(sizes[rows])
    return np.where(all_parsed(picks), h, np.nan)


def flips(picks: np.ndarray) -> np.ndarray:
    """1 where the returned image differs across orders; NaN unless every order parsed."""
    parsed = all_parsed(picks)
    differs = (picks != picks[:, :1]).any(axis=1)
    return np.where(parsed, differs.astype(float), np.nan)


def generator_table(data: SelectionData, judge: str, resampling: Resampling = Resampling()) -> pd.DataFrame:
    """Choice share per generator pooled over orders and prompts vs the uniform expectation,
    with the generator's part in the judge's order-0 stereotype difference.

    share = picks of the generator / valid calls; uniform = mean over valid calls of
    1[generator in pool] / m; count = its picks over all orders.
    Order 0 (the judge's own policy): count_order0 = prompts whose order-0 pick is the
    generator's image, share_order0 = count_order0 / prompts with an order-0 pick.
    stereotype_mean = mean stereotype rating of the generator's images (every pool).
    With d_p = stereotype of the order-0 pick − pool mean stereotype (prompts where both
    are rated, N of them) and G_g the prompts whose order-0 pick is generator g's image:
    stereotype_delta = mean_{p ∈ G_g} d_p, its interval resampling G_g at fixed n, and
    contribution = Σ_{p ∈ G_g} d_p / N, so contributions sum over generators to the
    judge's order-0 stereotype difference mean_p d_p. NaN without stereotype ratings.
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

    first = picks[:, 0]
    has_first = first >= 0
    first_model = np.where(has_first, codes[np.arange(data.n_prompts), np.clip(first, 0, None)], -1)
    chosen_first = np.bincount(first_model[has_first], minlength=len(models))
    stereotype = data.outcomes.get("stereotype", np.full(data.mask.shape, np.nan))
    diff = metrics.picked(stereotype, first) - metrics.random_value(stereotype)
    rated = ~np.isnan(diff)
    rows = []
    for i, model in enumerate(models):
        if not model:
            continue
        images = stereotype[(codes == i) & data.mask]
        images = images[~np.isnan(images)]
        own = diff[rated & (first_model == i)]
        rows.append((
            judge, str(model),
            chosen[i] / n if n else np.nan, expected[i] / n if n else np.nan, int(chosen[i]),
            int(chosen_first[i]), chosen_first[i] / has_first.sum() if has_first.any() else np.nan,
            float(images.mean()) if len(images) else np.nan,
            float(own.mean()) if len(own) else np.nan,
            *_fixed_n_interval(own, resampling),
            float(own.sum() / rated.sum()) if rated.any() else np.nan,
        ))
    return pd.DataFrame(rows, columns=GENERATOR_COLUMNS)


def generator_slot_table(data: SelectionData, judge: str, calls: OrderedCalls) -> pd.DataFrame:
    """Choice rate of each generator in each slot over the judge's valid calls, all orders.

    presented = valid calls (whose pick is an image of the dataset) showing one of the generator's
    images in that slot, chosen = those picking it, rate = chosen / presented (NaN when never
    presented); slot "all" pools the slots. Slot orders come from the recorded calls (`calls`, the
    judge's `OrderedCalls`: slot_order, picks), since imported logs need not use rotations; counted a
    chunk of prompts at a time (`generator_slot_counts`; the table: `generator_slot_frame`).
    """
    return generator_slot_frame(judge, *generator_slot_counts(data, judge, calls))


def generator_slot_counts(data: SelectionData, judge: str, calls: OrderedCalls
                          ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(the generators of `data`'s images, sorted by name; presented (G, M) and chosen (G, M) int64 per
    generator and slot, M = `data`'s largest pool) as `generator_slot_table` counts them: counts of
    prompts held apart add up, cell by cell, once their generators are aligned by name."""
    width = data.mask.shape[1]
    generators = sorted(g for g in set(data.source_models[data.mask]) if g)
    size = len(generators) * width
    presented, chosen = np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64)
    for rows in prompt_chunks(data.n_prompts):  # a chunk of prompts' calls at a time
        mine = calls.rows(rows)
        generator_code = np.full(mine.mask.shape, -1, dtype=np.int64)
        generator_code[mine.mask] = pd.Index(generators).get_indexer(data.source_models[rows][mine.mask])
        valid = np.isin(data.statuses[judge][rows], ["ok", "recovered"]) & (mine.picks >= 0)
        p, k, s = np.nonzero(valid[:, :, None] & (mine.slot_order >= 0))
        shown = mine.slot_order[p, k, s]
        code = generator_code[p, shown]
        keep = code >= 0
        cell = code[keep] * width + s[keep]
        presented += np.bincount(cell, minlength=size)
        chosen += np.bincount(cell[(shown == mine.picks[p, k])[keep]], minlength=size)
    return generators, presented.reshape(len(generators), width), chosen.reshape(len(generators), width)


def generator_slot_frame(judge: str, generators: Sequence[str], presented: np.ndarray, chosen: np.ndarray
                         ) -> pd.DataFrame:
    """`generator_slot_table`'s rows from `generator_slot_counts`' counts (G generators sorted by name, M slots)."""
    width = presented.shape[1]
    table = pd.DataFrame({
        "generator": np.repeat(np.array(generators, dtype=object), width),
        "slot": np.tile(np.arange(width), len(generators)),
        "presented": presented.ravel(),
        "chosen": chosen.ravel(),
    })
    table["slot"] = np.array(slot_labels(width), dtype=object)[table["slot"].to_numpy()]
    pooled = table.groupby("generator", as_index=False)[["presented", "chosen"]].sum().assign(slot="all")
    table = pd.concat([table, pooled], ignore_index=True)
    table["slot_order"] = table["slot"].map({label: i for i, label in enumerate([*slot_labels(width), "all"])})
    table = table.sort_values(["generator", "slot_order"], ignore_index=True)
    table["rate"] = bootstrap.ratio(table["chosen"].to_numpy(float), table["presented"].to_numpy(float))
    return table.assign(judge=judge)[GENERATOR_SLOT_COLUMNS]


def range_tertiles(spread: np.ndarray) -> np.ndarray:
    """Label per prompt: "low" / "mid" / "high" tertile of the rating range (h* − min h).

    Cut points are the 1/3 and 2/3 quantiles of the range over prompts with one
    (linear interpolation): low ≤ q1 < mid ≤ q2 < high, with a 1e-12 tolerance so that
    equal ranges stay together in the lower group; "" where the range is undefined.
    """
    known = ~np.isnan(spread)
    if not known.any():
        return np.full(len(spread), "", dtype=object)
    return tertile_labels(spread, *np.quantile(spread[known], [1 / 3, 2 / 3]))


def tertile_labels(spread: np.ndarray, q1: float, q2: float) -> np.ndarray:
    """Label per prompt by the cut points q1 ≤ q2: "low" where spread ≤ q1 + TOL, "mid" where
    ≤ q2 + TOL, else "high"; "" where the spread is NaN (`range_tertiles` with given cut points, as a
    partition of a study labels its prompts by the whole study's cut points)."""
    labels = np.full(len(spread), "", dtype=object)
    known = ~np.isnan(spread)
    labels[known] = np.where(spread[known] <= q1 + metrics.TOL, "low",
                             np.where(spread[known] <= q2 + metrics.TOL, "mid", "high"))
    return labels


def near_tie_counts(values: np.ndarray) -> np.ndarray:
    """Candidates per prompt rated within NEAR_TIE (0.05) of the best rating, the best included."""
    present = ~np.isnan(values)
    near = present & (values >= metrics.oracle_value(values)[:, None] - NEAR_TIE - metrics.TOL)
    return near.sum(axis=1)


def flip_by_range(data: SelectionData, judge: str, resampling: Resampling = Resampling()) -> pd.DataFrame:
    """Flip rate by tertile of the pool's rating range (see `range_tertiles`).

    range_lo / range_hi: the smallest and largest range observed in the tertile;
    prompts: its prompts; parsed: those where every order parsed, over which
    flip_rate is the mean and flip_rate_lo / _hi its 95% percentile interval (fixed n = parsed).
    """
    spread = metrics.value_range(data.utility)
    labels = range_tertiles(spread)
    flip = flips(valid_picks(data.picks[judge]))
    rows = []
    for name in TERTILES:
        members = labels == name
        bounds = (float(spread[members].min()), float(spread[members].max())) if members.any() else (np.nan, np.nan)
        rows.append((judge, name, *bounds, *_flip_summary(flip, members, resampling)))
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


def flip_by_near_ties(data: SelectionData, judge: str, resampling: Resampling = Resampling()) -> pd.DataFrame:
    """Flip rate by the pool's number of near-ties (see `near_tie_counts`), one row per count
    observed: prompts, parsed (every order parsed), flip_rate over the parsed ones and its
    95% percentile interval (fixed n = parsed)."""
    counts = near_tie_counts(data.utility)
    flip = flips(valid_picks(data.picks[judge]))
    rows = [(judge, int(k), *_flip_summary(flip, counts == k, resampling)) for k in np.unique(counts[counts > 0])]
    return pd.DataFrame(rows, columns=NEAR_TIE_COLUMNS)


def _flip_summary(flip: np.ndarray, members: np.ndarray, resampling: Resampling) -> tuple:
    """(prompts, parsed, flip rate, lo, hi) for the prompts in `members`."""
    values = flip[members & ~np.isnan(flip)]
    rate = float(values.mean()) if len(values) else np.nan
    return (int(members.sum()), len(values), rate, *_fixed_n_interval(values, resampling))


def _fixed_n_interval(values: np.ndarray, resampling: Resampling) -> tuple[float, float]:
    """95% percentile interval of mean(values) resampled at fixed n = len(values)
    (`bootstrap.fixed_n_means`: a generator seeded with resampling.seed for this group alone);
    NaN when there are no values or no resamples."""
    samples = bootstrap.fixed_n_means(np.asarray(values, dtype=float)[:, None], resampling)
    lo, hi = bootstrap.percentile_interval(samples)
    return (float(lo[0]), float(hi[0]))


def fixed_n_interval_of_counts(distinct: np.ndarray, counts: np.ndarray, resampling: Resampling
                              ) -> tuple[float, float]:
    """`_fixed_n_interval` of n = Σ counts > `bootstrap.EXACT_DRAWS_UP_TO` values given by their multiset
    (`bootstrap.counted_means`: distinct ascending float64, counts int64). ValueError for the rare value set
    whose resamples keep index draws (non-finite values, or values that fit no lattice window), which
    depend on the values' order."""
    means = bootstrap.counted_means(distinct, counts, resampling)
    if means is None:
        raise ValueError(f"the fixed-n interval of these {int(np.sum(counts))} values draws them by index "
                         "(non-finite values or an extreme outlier): it needs the values in prompt order")
    lo, hi = bootstrap.percentile_interval(means[:, None])
    return (float(lo[0]), float(hi[0]))


def first_slot_interval(first: np.ndarray, valid: np.ndarray, resampling: Resampling) -> tuple[float, float]:
    """95% percentile interval of Σ_p first_p / Σ_p valid_p (the first-slot share of valid calls)
    under a prompt-level bootstrap of the n prompts with a valid call (a prompt's orders travel together).

    first_p: the prompt's valid calls choosing slot A; valid_p: its valid calls. n ≤
    `bootstrap.EXACT_DRAWS_UP_TO`: resample b takes the prompts at row b of
    `np.random.default_rng(seed).integers(0, n, size=(B, n))` (`bootstrap.resampled_sums`).
    Above: how often each distinct (first, valid) pair is drawn is Multinomial(n, its share),
    the same distribution with far fewer draws (B, seed = resampling.resamples, resampling.seed).
    NaN without such prompts or resamples.
    """
    keep = valid > 0
    pairs = np.column_stack([first[keep], valid[keep]]).astype(float)
    n = len(pairs)
    if n > bootstrap.EXACT_DRAWS_UP_TO:
        return first_slot_interval_of_counts(*np.unique(pairs, axis=0, return_counts=True), resampling)
    if n == 0 or resampling.resamples == 0:
        return (float("nan"), float("nan"))
    return _share_interval(bootstrap.resampled_sums(pairs, resampling).totals)


def first_slot_interval_of_counts(distinct: np.ndarray, counts: np.ndarray, resampling: Resampling
                                  ) -> tuple[float, float]:
    """`first_slot_interval` of n = Σ counts > `bootstrap.EXACT_DRAWS_UP_TO` prompts given by their
    distinct (first, valid) pairs (k, 2) float, in `np.unique(axis=0)` order, counts[i] prompts each:
    above EXACT_DRAWS_UP_TO the interval depends on these alone."""
    n = int(np.sum(counts))
    if n == 0 or resampling.resamples == 0:
        return (float("nan"), float("nan"))
    draws = np.random.default_rng(resampling.seed).multinomial(n, counts / n, size=resampling.resamples)
    return _share_interval(draws @ distinct)


def _share_interval(totals: np.ndarray) -> tuple[float, float]:
    """95% percentile interval of totals[:, 0] / totals[:, 1] over the resamples (rows)."""
    lo, hi = bootstrap.percentile_interval(bootstrap.ratio(totals[:, 0], totals[:, 1]))
    return (float(lo[0]), float(hi[0]))


def judge_summary(data: SelectionData, judge: str, resampling: Resampling = Resampling()) -> dict[str, object]:
    """Calls, statuses, first-slot share vs uniform, χ² test, flip rate and entropy, with 95% intervals.

    calls: recorded calls; valid: calls with a pick; recovered: valid calls the
    lenient adapter recovered; failed: parse or runtime failures. first_slot: share
    of valid calls choosing slot A, first_slot_lo / _hi its prompt-level bootstrap
    interval (`first_slot_interval`); first_slot_uniform: mean of 1/m over them.
    flip_rate / entropy: over prompts where every order parsed (flip_n of them);
    flip_rate_lo / _hi: fixed-n bootstrap of the flip indicators of those prompts.
    """
    status = data.statuses[judge]
    valid, sizes = _valid_calls(data, judge)
    picks = valid_picks(data.picks[judge])
    flip = flips(picks)
    entropy = order_entropy(picks, data.pool_sizes, data.mask.shape[1])
    stat, df, p = slot_chi_square(data, judge)
    n_valid = int(valid.sum())
    slot = data.slots[judge][valid]
    parsed = flip[~np.isnan(flip)]
    first_lo, first_hi = first_slot_interval((valid & (data.slots[judge] == 0)).sum(axis=1), valid.sum(axis=1),
                                             resampling)
    flip_lo, flip_hi = _fixed_n_interval(parsed, resampling)
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
        "flip_n": len(parsed),
        "flip_rate": float(parsed.mean()) if len(parsed) else np.nan,
        "entropy": float(np.nanmean(entropy)) if (~np.isnan(entropy)).any() else np.nan,
        "first_slot_lo": first_lo,
        "first_slot_hi": first_hi,
        "flip_rate_lo": flip_lo,
        "flip_rate_hi": flip_hi,
    }
