"""Properties of the selection measures (DESIGN §4) over generated pools.

Pools have 2–5 candidates, padded to the widest pool (NaN in the padding), with
ratings on a coarse grid ({0, .5, 1}: many ties), on sixths, or on a 1e-6 grid
(effectively continuous; distinct values differ by far more than the measures'
tie tolerance, so exact rational arithmetic is an independent reference).
Picks include NO_PICK and NO_CALL. Runs are derandomised and bounded.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit_core import Resampling
from audit_core.selection import gates, metrics
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import NO_CALL, NO_PICK
from audit_core.selection.policies import policy_picks
from audit_core.selection.votes import all_parsed, majority_vote
from audit_core.stats import bootstrap
from tests.support.selection_data import make_data

GRIDS = (2, 6, 10**6)  # rating denominators: {0, .5, 1}, sixths, near-continuous
TOL = 1e-9
RESAMPLES = 200

cheap = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
costly = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def ratings(draw: st.DrawFn, max_prompts: int = 8) -> np.ndarray:
    """(P, M) ratings, M = widest pool, NaN padding after each pool's candidates."""
    sizes = draw(st.lists(st.integers(2, 5), min_size=1, max_size=max_prompts))
    grid = draw(st.sampled_from(GRIDS))
    h = np.full((len(sizes), max(sizes)), np.nan)
    for p, m in enumerate(sizes):
        h[p, :m] = np.array(draw(st.lists(st.integers(0, grid), min_size=m, max_size=m))) / grid
    return h


def sizes_of(h: np.ndarray) -> np.ndarray:
    return (~np.isnan(h)).sum(axis=1)


@st.composite
def picks_for(
    draw: st.DrawFn, h: np.ndarray, orders: int, failures: tuple[int, ...] = (NO_PICK, NO_CALL)
) -> np.ndarray:
    """(P, orders) canonical picks inside each pool, some of them failed calls."""
    out = np.empty((len(h), orders), dtype=np.int64)
    for p, m in enumerate(sizes_of(h)):
        choice = st.integers(0, int(m) - 1)
        if failures:
            choice = st.one_of(choice, st.sampled_from(failures))
        out[p] = draw(st.lists(choice, min_size=orders, max_size=orders))
    return out


@st.composite
def audit_inputs(draw: st.DrawFn):
    """SelectionData with one or two judges over K orders, maybe a scorer, countries, a cultural outcome."""
    h = draw(ratings())
    n = len(h)
    orders = draw(st.integers(1, 4))
    judges = draw(st.sampled_from([("a",), ("a", "b")]))
    picks = {j: draw(picks_for(h, orders)) for j in judges}
    countries = draw(st.lists(st.sampled_from(["X", "Y", "Z"]), min_size=n, max_size=n))
    stereotype = np.array(draw(st.lists(st.sampled_from([0.0, 1 / 3, 2 / 3, 1.0]), min_size=h.size,
                                        max_size=h.size))).reshape(h.shape)
    scores = {}
    if draw(st.booleans()):
        scores["clip"] = np.array(draw(st.lists(st.integers(0, 3), min_size=h.size, max_size=h.size))
                                  ).reshape(h.shape) / 3.0
    return make_data(h, picks, countries, {"stereotype": stereotype}, scores)


def exact(value: float) -> Fraction:
    """The grid rating k/d (d ≤ 1e6) a float stands for, exactly."""
    return Fraction(float(value)).limit_denominator(max(GRIDS))


def exact_pool(row: np.ndarray) -> tuple[list[Fraction], Fraction]:
    """A pool's ratings and their mean as exact rationals."""
    values = [exact(v) for v in row if not np.isnan(v)]
    return values, sum(values) / len(values)


# ------------------------------------------------------------------ G = (h* − h̄) − R


@cheap
@given(st.data())
def test_gain_is_the_oracle_gap_minus_regret_for_every_pick(data):
    h = data.draw(ratings())
    pick = data.draw(picks_for(h, 1, failures=(NO_PICK,)))[:, 0]
    gain, regret = metrics.gain_over_random(h, pick), metrics.regret(h, pick)
    gap = metrics.oracle_value(h) - metrics.random_value(h)
    np.testing.assert_allclose(gain, gap - regret, atol=TOL)
    assert (np.isnan(gain) == (pick < 0)).all() and (np.isnan(regret) == (pick < 0)).all()
    acted = pick >= 0
    assert (regret[acted] >= -TOL).all()
    assert ((regret[acted] <= TOL) == (metrics.is_best(h, pick)[acted] == 1)).all()
    pools = metrics.pool_measures({"alignment": h})
    for choice in (pick, metrics.uniform_choice(h), metrics.oracle_choice(h)):
        s = metrics.prompt_stats(pools, choice)
        np.testing.assert_allclose(s["gain"], s["random_regret"] - s["regret"], atol=TOL)


@costly
@given(audit_inputs())
def test_every_policy_of_the_audit_keeps_gain_equal_to_random_regret_minus_regret(data):
    table = audit_selection(data, Resampling(0)).policies
    measures = ["utility", "regret", "gain", "bmr", "best", "random_regret", "regret_lo", "gain_lo"]
    assert not [c for c in measures if table[c].dtype.kind != "f"], table[measures].dtypes.to_dict()
    acted = table["n"] > 0
    np.testing.assert_allclose(table.loc[acted, "gain"], table.loc[acted, "random_regret"] - table.loc[acted, "regret"],
                               atol=TOL)
    by_name = table.set_index("policy")
    assert by_name.loc["random", "gain"] == 0.0  # exact random is computed, so its gain is exactly 0
    assert by_name.loc["oracle", "regret"] == 0.0 and by_name.loc["oracle", "best"] == 1.0


# ------------------------------------------------------------------ random and oracle ignore candidate order


def permuted(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, order, axis=1)


@st.composite
def column_orders(draw: st.DrawFn, shape: tuple[int, int]) -> np.ndarray:
    """One permutation of all columns (padding included, so the mask moves too) per row."""
    rows = [draw(st.permutations(range(shape[1]))) for _ in range(shape[0])]
    return np.array(rows, dtype=np.int64).reshape(shape)


@cheap
@given(st.data())
def test_random_and_oracle_do_not_depend_on_candidate_order(data):
    h = data.draw(ratings())
    order = data.draw(column_orders(h.shape))
    g = permuted(h, order)
    assert (np.isnan(g).sum(axis=1) == np.isnan(h).sum(axis=1)).all()
    for measure in (metrics.random_value, metrics.oracle_value, metrics.below_mean_fraction, metrics.best_fraction,
                    metrics.value_range):
        np.testing.assert_allclose(measure(g), measure(h), atol=TOL)
    before, after = metrics.pool_measures({"alignment": h}), metrics.pool_measures({"alignment": g})
    for choice in (metrics.uniform_choice, metrics.oracle_choice):
        s, t = metrics.prompt_stats(before, choice(h)), metrics.prompt_stats(after, choice(g))
        for key in ("acted", "utility", "regret", "gain", "bmr", "bmr_random", "best", "near_best", "bmr05"):
            np.testing.assert_allclose(t[key], s[key], atol=TOL, err_msg=f"{choice.__name__}: {key}")


@costly
@given(st.data())
def test_random_and_oracle_rows_of_the_audit_do_not_depend_on_candidate_order(data):
    h = data.draw(ratings())
    stereotype = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=h.size, max_size=h.size))
                          ).reshape(h.shape)
    order = data.draw(column_orders(h.shape))
    countries = ["X" if i % 3 else "Y" for i in range(len(h))]
    rows = []
    for values, extra in ((h, stereotype), (permuted(h, order), permuted(stereotype, order))):
        table = audit_selection(make_data(values, countries=countries, extra={"stereotype": extra}),
                                Resampling(RESAMPLES, 3)).policies
        rows.append(table.set_index("policy").loc[["random", "oracle"]].select_dtypes("number"))
    np.testing.assert_allclose(rows[1].to_numpy(float), rows[0].to_numpy(float), atol=TOL)


# ------------------------------------------------------------------ gates are monotone in their threshold


@cheap
@given(st.data())
def test_order_gates_are_nested_and_coverage_never_grows_with_the_threshold(data):
    h = data.draw(ratings())
    orders = data.draw(st.integers(1, 5))
    picks = data.draw(picks_for(h, orders))
    width = h.shape[1]
    q = gates.order_agreement(picks, width)
    parsed = all_parsed(picks)
    winner, _ = majority_vote(picks, width)
    previous = parsed
    coverage = [parsed.mean()]
    for k in range(1, orders + 2):
        gate = gates.agreement_gate(picks, width, k)
        acts = gate >= 0
        assert not (acts & ~previous).any(), f"kept at threshold {k} but not at {k - 1}"
        assert (gate[acts] == winner[acts]).all()  # the threshold decides whether, never what
        np.testing.assert_array_equal(acts, parsed & (q * orders >= k - TOL))
        rejected = gates.rejected(picks[:, 0], gate)
        np.testing.assert_array_equal(rejected >= 0, (picks[:, 0] >= 0) & ~acts)
        coverage.append(acts.mean())
        previous = acts
    assert all(a >= b for a, b in zip(coverage, coverage[1:]))
    np.testing.assert_array_equal(gates.agreement_gate(picks, width, 1), winner)  # majority always acts when parsed
    assert not (gates.agreement_gate(picks, width, orders + 1) >= 0).any()


@cheap
@given(st.data())
def test_majority_pick_is_the_most_voted_image_with_ties_to_canonical_order(data):
    h = data.draw(ratings())
    picks = data.draw(picks_for(h, data.draw(st.integers(1, 5))))
    winner, top = majority_vote(picks, h.shape[1])
    for p, row in enumerate(picks):
        if (row < 0).any():
            assert (winner[p], top[p]) == (-1, 0)
            continue
        counts = Counter(row.tolist())
        most = max(counts.values())
        assert (winner[p], top[p]) == (min(c for c, v in counts.items() if v == most), most)


@costly
@given(audit_inputs())
def test_gate_coverage_in_the_audit_never_grows_with_the_threshold(data):
    result = audit_selection(data, Resampling(0))
    for judge, part in result.risk_coverage[result.risk_coverage["kind"].isin(["judge", "majority", "order_gate"])
                                            ].groupby("judge"):
        coverage = part.sort_values("threshold")["coverage"].to_numpy()
        assert (np.diff(coverage) <= TOL).all(), (judge, part[["policy", "threshold", "coverage"]])
    kept = result.gates.set_index(["gate", "side"])["n"]
    table = result.policies.set_index("policy")
    for gate in result.gates["gate"].unique():
        base = table.loc[gate, "base_judge"]
        assert kept[(gate, "kept")] + kept[(gate, "rejected")] == table.loc[base, "n"]


# ------------------------------------------------------------------ percentile intervals contain the mean


@cheap
@given(st.data())
def test_percentile_interval_of_resampled_means_contains_the_mean_and_matches_numpy(data):
    grid = data.draw(st.sampled_from(GRIDS))
    x = np.array(data.draw(st.lists(st.integers(0, grid), min_size=1, max_size=30))) / grid
    seed = data.draw(st.integers(0, 2**32 - 1))
    level = data.draw(st.sampled_from([0.9, 0.95, 0.99]))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(RESAMPLES, len(x)))].mean(axis=1)
    lo, hi = bootstrap.percentile_interval(means[:, None], level)
    assert lo[0] - TOL <= x.mean() <= hi[0] + TOL
    np.testing.assert_allclose([lo[0], hi[0]], np.quantile(means, [(1 - level) / 2, (1 + level) / 2]), atol=1e-12)


@cheap
@given(st.data())
def test_percentile_intervals_ignore_undefined_resamples_as_numpy_nanquantile_does(data):
    b = data.draw(st.integers(1, 60))
    k = data.draw(st.integers(1, 4))
    cells = st.one_of(st.floats(-1, 1, allow_nan=False), st.just(np.nan))
    samples = np.array(data.draw(st.lists(cells, min_size=b * k, max_size=b * k))).reshape(b, k)
    (lo, hi), = bootstrap.percentile_intervals(samples, (0.95,))
    defined = ~np.isnan(samples).all(axis=0)
    assert np.isnan(lo[~defined]).all() and np.isnan(hi[~defined]).all()
    if defined.any():
        expected = np.nanquantile(samples[:, defined], [0.025, 0.975], axis=0)
        np.testing.assert_allclose(lo[defined], expected[0], atol=1e-12)
        np.testing.assert_allclose(hi[defined], expected[1], atol=1e-12)


def interval_triples(columns: list[str]) -> list[tuple[str, str, str]]:
    """(estimate, lo, hi) column names of every mean with an interval; the worst group is a max, not a mean."""
    triples = []
    for lo in columns:
        for suffix_lo, suffix_hi in (("_lo", "_hi"), ("_lo_bonf", "_hi_bonf")):
            if lo.endswith(suffix_lo):
                stat = lo[: -len(suffix_lo)]
                if stat != "worst_group_regret" and stat in columns and stat + suffix_hi in columns:
                    triples.append((stat, lo, stat + suffix_hi))
    return triples


@costly
@given(audit_inputs(), st.integers(0, 1000))
def test_every_interval_of_the_audit_contains_its_point_estimate(data, seed):
    result = audit_selection(data, Resampling(RESAMPLES, seed))
    checked = 0
    for name, frame in (("policies", result.policies), ("groups", result.groups)):
        for stat, lo, hi in interval_triples(list(frame.columns)):
            part = frame[frame[lo].notna()]
            inside = (part[lo] - TOL <= part[stat]) & (part[stat] <= part[hi] + TOL)
            assert inside.all(), f"{name}.{stat}: {part.loc[~inside, ['policy', stat, lo, hi]].to_dict('records')}"
            checked += len(part)
    assert checked > 0


# ------------------------------------------------------------------ BMR of random = below-mean fraction


@cheap
@given(st.data())
def test_random_below_mean_rate_is_the_share_of_candidates_below_the_pool_mean(data):
    h = data.draw(ratings())
    pick = data.draw(picks_for(h, 1, failures=(NO_PICK,)))[:, 0]
    expected = []
    for row in h:
        values, mean = exact_pool(row)
        expected.append(sum(v < mean for v in values) / len(values))
    pools = metrics.pool_measures({"alignment": h})
    np.testing.assert_allclose(metrics.below_mean_fraction(h), expected, atol=1e-12)
    np.testing.assert_allclose(metrics.prompt_stats(pools, metrics.uniform_choice(h))["bmr"], expected, atol=1e-12)
    s = metrics.prompt_stats(pools, pick)  # a judge is compared with random on the prompts it acts on
    np.testing.assert_allclose(s["bmr_random"], np.where(pick >= 0, expected, np.nan), atol=1e-12)
    for p in np.flatnonzero(pick >= 0):
        assert s["bmr"][p] == float(exact(h[p, pick[p]]) < exact_pool(h[p])[1])


@costly
@given(audit_inputs())
def test_random_bmr_in_the_audit_is_the_mean_below_mean_fraction_on_matched_prompts(data):
    table = audit_selection(data, Resampling(0)).policies.set_index("policy")
    fraction = np.array([np.mean([v < mean for v in values]) for values, mean in map(exact_pool, data.utility)])
    assert table.loc["random", "bmr"] == pytest.approx(fraction.mean(), abs=1e-12)
    assert table.loc["random", "bmr_random"] == pytest.approx(fraction.mean(), abs=1e-12)
    for name, pick in policy_picks(data).items():
        acted = pick >= 0
        if acted.any():
            assert table.loc[name, "bmr_random"] == pytest.approx(fraction[acted].mean(), abs=1e-12), name
        else:
            assert table.loc[name, "n"] == 0
