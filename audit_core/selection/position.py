"""How a judge behaves across slots and orders: position bias, flips, entropy, generators.

A *valid call* is a recorded call that returned a pick (status ok or recovered).
Intervals on a group's mean (a flip group, a generator's order-0 picks, the judge's
flip rate) resample that group's values at fixed n with a generator seeded afresh for
every group, as the published study does. The first-slot share is a ratio over calls,
and a prompt's orders travel together: its interval resamples prompts (`first_slot_interval`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
RANGE_QUANTILES = (1 / 3, 2 / 3)  # the flip table's and the range slice's tertile cut points


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
    sums = generator_sums(data, judge)
    own = [group_stat(values, resampling) for values in sums.pop("own")]
    return generator_frame(judge, sums, own)


# A group of values behind a mean and its fixed-n interval, as a table row reads it: (n, their float sum,
# (lo, hi) its `fixed_n_interval`); a row's mean is sum / n (`values.mean()`), NaN when n = 0.
GroupStat = tuple[int, float, tuple[float, float]]


def generator_sums(data: SelectionData, judge: str) -> dict[str, object]:
    """`generator_table`'s counts and sums over the prompts of `data`, generators sorted by name: valid (calls),
    chosen, expected (Σ over valid calls of the generator's copies in the pool / m), chosen_first (order-0
    picks), with_first (prompts with an order-0 pick), image_sums / image_n (its images' stereotype ratings),
    rated (prompts with a d_p) and own: per generator its prompts' d_p in prompt order. Counts and sums of
    prompts held apart add up (generators by name; the own values joined in prompt order)."""
    valid, _ = _valid_calls(data, judge)
    picks = valid_picks(data.picks[judge])
    codes, models = pd.factorize(pd.Series(data.source_models.ravel()), sort=True)
    codes = codes.reshape(data.source_models.shape)
    rows_idx, orders = np.nonzero(valid)
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
    keep = [i for i, model in enumerate(models) if model]
    images = [stereotype[(codes == i) & data.mask] for i in keep]
    images = [values[~np.isnan(values)] for values in images]
    return {
        "generators": tuple(str(models[i]) for i in keep),
        "valid": len(rows_idx),
        "chosen": chosen[keep].astype(np.int64),
        "expected": expected[keep],
        "chosen_first": chosen_first[keep].astype(np.int64),
        "with_first": int(has_first.sum()),
        "image_sums": np.array([np.sum(values) for values in images], dtype=float),
        "image_n": np.array([len(values) for values in images], dtype=np.int64),
        "rated": int(rated.sum()),
        "own": [diff[rated & (first_model == i)] for i in keep],
    }


def generator_frame(judge: str, sums: dict[str, object], own: Sequence[GroupStat]) -> pd.DataFrame:
    """`generator_table`'s rows from `generator_sums` (without own) and each generator's own d_p as a GroupStat."""
    n, with_first, rated = sums["valid"], sums["with_first"], sums["rated"]
    rows = []
    for i, model in enumerate(sums["generators"]):
        size, total, interval = own[i]
        image_n = sums["image_n"][i]
        rows.append((
            judge, model,
            sums["chosen"][i] / n if n else np.nan, sums["expected"][i] / n if n else np.nan, int(sums["chosen"][i]),
            int(sums["chosen_first"][i]), sums["chosen_first"][i] / with_first if with_first else np.nan,
            float(sums["image_sums"][i] / image_n) if image_n else np.nan,
            float(total / size) if size else np.nan,
            *interval,
            float(total / rated) if rated else np.nan,
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
    if np.isnan(spread).all():
        return np.full(len(spread), "", dtype=object)
    return tertile_labels(spread, *range_cuts(spread))


def range_cuts(spread: np.ndarray) -> np.ndarray:
    """(q1, q2): the RANGE_QUANTILES (numpy's, linear) of the rating range over prompts with one; NaN both
    when no prompt has one."""
    known = spread[~np.isnan(spread)]
    return np.quantile(known, RANGE_QUANTILES) if len(known) else np.full(len(RANGE_QUANTILES), np.nan)


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
    groups = tertile_groups(spread, range_tertiles(spread), flips(valid_picks(data.picks[judge])))
    return flip_range_frame(judge, groups, [group_stat(values, resampling) for values in groups["flips"]])


def flip_by_near_ties(data: SelectionData, judge: str, resampling: Resampling = Resampling()) -> pd.DataFrame:
    """Flip rate by the pool's number of near-ties (see `near_tie_counts`), one row per count
    observed: prompts, parsed (every order parsed), flip_rate over the parsed ones and its
    95% percentile interval (fixed n = parsed)."""
    groups = near_tie_groups(near_tie_counts(data.utility), flips(valid_picks(data.picks[judge])), data.mask.shape[1])
    return near_tie_frame(judge, groups["prompts"], lambda k: group_stat(groups["flips"][k], resampling))


def tertile_groups(spread: np.ndarray, labels: np.ndarray, flip: np.ndarray) -> dict[str, object]:
    """Per tertile (TERTILES order) of the prompts labelled `labels`: prompts, range_lo / range_hi (the least
    and largest range, +inf / −inf without prompts: they combine by min and max) and flips: its parsed
    prompts' flip indicators in prompt order."""
    members = [labels == name for name in TERTILES]
    return {
        "prompts": np.array([m.sum() for m in members], dtype=np.int64),
        "range_lo": np.array([spread[m].min() if m.any() else np.inf for m in members]),
        "range_hi": np.array([spread[m].max() if m.any() else -np.inf for m in members]),
        "flips": [flip[m & ~np.isnan(flip)] for m in members],
    }


def flip_range_frame(judge: str, groups: dict[str, object], stats: Sequence[GroupStat]) -> pd.DataFrame:
    """`flip_by_range`'s rows from `tertile_groups` and each tertile's flips as a GroupStat."""
    rows = []
    for t, name in enumerate(TERTILES):
        prompts = int(groups["prompts"][t])
        bounds = (float(groups["range_lo"][t]), float(groups["range_hi"][t])) if prompts else (np.nan, np.nan)
        rows.append((judge, name, *bounds, *_flip_row(prompts, stats[t])))
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


def near_tie_groups(near: np.ndarray, flip: np.ndarray, width: int) -> dict[str, object]:
    """Per near-tie count k = 0..width (`near_tie_counts` per prompt): prompts (width + 1,) and flips: the flip
    indicators of its parsed prompts in prompt order."""
    return {"prompts": np.bincount(near, minlength=width + 1).astype(np.int64),
            "flips": [flip[(near == k) & ~np.isnan(flip)] for k in range(width + 1)]}


def near_tie_frame(judge: str, prompts: np.ndarray, stat: Callable[[int], GroupStat]) -> pd.DataFrame:
    """`flip_by_near_ties`' rows from `near_tie_groups`' prompts, one per count k ≥ 1 some prompt has, and
    stat(k): the flips of its prompts as a GroupStat."""
    rows = [(judge, int(k), *_flip_row(int(prompts[k]), stat(k))) for k in np.nonzero(prompts)[0] if k > 0]
    return pd.DataFrame(rows, columns=NEAR_TIE_COLUMNS)


def _flip_row(prompts: int, stat: GroupStat) -> tuple:
    """(prompts, parsed, flip rate, lo, hi) of a group's prompts and the GroupStat of their flips."""
    parsed, total, interval = stat
    return (prompts, parsed, float(total / parsed) if parsed else np.nan, *interval)


def group_stat(values: np.ndarray, resampling: Resampling) -> GroupStat:
    """The GroupStat of `values` (in prompt order): (n, np.sum, `fixed_n_interval`)."""
    return (len(values), np.sum(values), fixed_n_interval(values, resampling))


def fixed_n_interval(values: np.ndarray, resampling: Resampling) -> tuple[float, float]:
    """95% percentile interval of mean(values) resampled at fixed n = len(values)
    (`bootstrap.fixed_n_means`: a generator seeded with resampling.seed for this group alone);
    NaN when there are no values or no resamples."""
    samples = bootstrap.fixed_n_means(np.asarray(values, dtype=float)[:, None], resampling)
    lo, hi = bootstrap.percentile_interval(samples)
    return (float(lo[0]), float(hi[0]))


def fixed_n_interval_of_counts(distinct: np.ndarray, counts: np.ndarray, resampling: Resampling
                              ) -> tuple[float, float]:
    """`fixed_n_interval` of n = Σ counts > `bootstrap.EXACT_DRAWS_UP_TO` values given by their multiset
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
    sums = judge_sums(data, judge)
    pairs = sums.pop("first_slot")
    first_interval = first_slot_interval(pairs[:, 0], pairs[:, 1], resampling)
    return judge_row(judge, sums, group_stat(sums.pop("flips"), resampling), first_interval)


def judge_sums(data: SelectionData, judge: str) -> dict[str, object]:
    """`judge_summary`'s counts and sums over the prompts of `data`: orders (K); statuses (calls, recovered,
    parse_fail, runtime_fail); by_size (`slot_counts_by_size` of the valid calls); expected
    (`expected_slot_counts` of them); inverse_sizes (Σ 1/m over them); entropy (Σ, count) of `order_entropy`
    where defined; flips: the flip indicators of the prompts where every order parsed; first_slot: (n, 2) the
    (first, valid) pairs of the prompts with a valid call, in prompt order. Counts and sums of prompts held apart
    add up, and their flips and pairs join in prompt order."""
    status = data.statuses[judge]
    valid, sizes = _valid_calls(data, judge)
    picks = valid_picks(data.picks[judge])
    flip = flips(picks)
    entropy = order_entropy(picks, data.pool_sizes, data.mask.shape[1])
    defined = ~np.isnan(entropy)
    first, calls = (valid & (data.slots[judge] == 0)).sum(axis=1), valid.sum(axis=1)
    return {
        "orders": picks.shape[1],
        "statuses": np.array([(status != "").sum(), (status == "recovered").sum(), (status == "parse_fail").sum(),
                              (status == "runtime_fail").sum()], dtype=np.int64),
        "by_size": slot_counts_by_size(data.slots[judge][valid], sizes[valid], data.mask.shape[1]),
        "expected": expected_slot_counts(sizes[valid], data.mask.shape[1]),
        "inverse_sizes": float(np.sum(1 / sizes[valid])),
        # np.nanmean's sum: NaN as 0, so that one partition's entropy is the study's to the bit
        "entropy": (float(np.sum(np.where(defined, entropy, 0.0))), int(defined.sum())),
        "flips": flip[~np.isnan(flip)],
        "first_slot": np.column_stack([first[calls > 0], calls[calls > 0]]).astype(float),
    }


def judge_row(judge: str, sums: dict[str, object], flip: GroupStat, first_interval: tuple[float, float]
              ) -> dict[str, object]:
    """`judge_summary`'s row from `judge_sums` (without flips and first_slot), the GroupStat of the flips and the
    `first_slot_interval`."""
    calls, recovered, parse_fail, runtime_fail = (int(x) for x in sums["statuses"])
    by_size = sums["by_size"]
    n_valid = int(by_size.sum())
    stat, df, p = chi_square_of_counts(by_size.sum(axis=0), sums["expected"])
    entropy_sum, entropy_n = sums["entropy"]
    flip_n, flip_total, (flip_lo, flip_hi) = flip
    return {
        "judge": judge,
        "orders": sums["orders"],
        "calls": calls,
        "valid": n_valid,
        "recovered": recovered,
        "failed": parse_fail + runtime_fail,
        "parse_fail": parse_fail,
        "runtime_fail": runtime_fail,
        "first_slot": float(by_size[:, 0].sum() / n_valid) if n_valid else np.nan,
        "first_slot_uniform": float(sums["inverse_sizes"] / n_valid) if n_valid else np.nan,
        "chi2": stat,
        "chi2_df": df,
        "chi2_p": p,
        "flip_n": flip_n,
        "flip_rate": float(flip_total / flip_n) if flip_n else np.nan,
        "entropy": entropy_sum / entropy_n if entropy_n else np.nan,
        "first_slot_lo": first_interval[0],
        "first_slot_hi": first_interval[1],
        "flip_rate_lo": flip_lo,
        "flip_rate_hi": flip_hi,
    }
