"""Rating judges per reference pool (DESIGN §4b): known answers, independent implementations, bootstrap."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from audit_core import Resampling
from audit_core.rating import alignment
from audit_core.rating.reliability import pool_consensus
from audit_core.stats.bootstrap import count_weights


def votes_frame(table: dict[str, dict[str, list[float]]]) -> pd.DataFrame:
    """{pool: {candidate: [votes]}} → the long votes frame."""
    rows = [(cid, "rubric", pool, f"{pool}{k}", v) for pool, by_item in table.items()
            for cid, values in by_item.items() for k, v in enumerate(values)]
    return pd.DataFrame(rows, columns=["candidate_id", "outcome", "pool", "annotator", "value"])


def ratings_frame(table: dict[tuple[str, str], dict[str, float | str]]) -> pd.DataFrame:
    """{(judge, condition): {candidate: rating or status}} → the long ratings frame."""
    rows = [(judge, condition, cid, np.nan if isinstance(v, str) else float(v), v if isinstance(v, str) else "ok")
            for (judge, condition), by_item in table.items() for cid, v in by_item.items()]
    return pd.DataFrame(rows, columns=["judge", "condition", "candidate_id", "rating", "status"])


# pool a's consensus is an integer on every item; b agrees on i0, i1 and differs elsewhere
POOL_A = {"i0": [5, 5], "i1": [1, 1], "i2": [4, 4], "i3": [2, 2], "i4": [5, 5], "i5": [3, 3]}
POOL_B = {"i0": [5, 5], "i1": [1, 1], "i2": [2, 2], "i3": [4, 4], "i4": [3, 3], "i5": [5, 5]}
KNOWN = votes_frame({"a": POOL_A, "b": POOL_B})


def random_study(seed: int, n: int = 80) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """votes (two pools, 1–3 votes each, some items without pool b), ratings with abstentions
    and failures, items with a culture attribute."""
    rng = np.random.default_rng(seed)
    ids = [f"c{i:03d}" for i in range(n)]
    rows = []
    for pool, shift in (("a", 0.7), ("b", -0.7)):
        for i, cid in enumerate(ids):
            if pool == "b" and i % 9 == 0:
                continue
            centre = 3 + shift * (1 if i % 2 else -1) + rng.normal(0, 1.2)
            for k in range(int(rng.integers(1, 4))):
                rows.append((cid, "rubric", pool, f"{pool}{k}", float(np.clip(np.rint(centre + rng.normal(0, 0.8)), 1, 5))))
    votes = pd.DataFrame(rows, columns=["candidate_id", "outcome", "pool", "annotator", "value"])
    frames = []
    for judge in ("j1", "j2"):
        for condition in ("default", "persona"):
            r = np.clip(np.rint(3.4 + rng.normal(0, 1.1, n)), 1, 5)
            status = rng.choice(["ok", "ok", "ok", "ok", "ok", "ok", "abstained", "parse_fail", "runtime_fail"], n)
            frames.append(pd.DataFrame({"judge": judge, "condition": condition, "candidate_id": ids,
                                        "rating": np.where(status == "ok", r, np.nan), "status": status}))
    items = pd.DataFrame({"candidate_id": ids, "culture": np.where(np.arange(n) % 2, "east", "west")})
    return votes, pd.concat(frames, ignore_index=True), items


def half_up(x: float) -> int:
    return int(Decimal(str(float(x))).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def test_a_rater_copying_pool_a_has_mae_zero_and_tilt_plus_one() -> None:
    ca = {cid: v[0] for cid, v in POOL_A.items()}
    cb = {cid: v[0] for cid, v in POOL_B.items()}
    ratings = ratings_frame({("copy_a", "default"): ca, ("copy_b", "default"): cb,
                             ("midway", "default"): {c: (ca[c] + cb[c]) / 2 for c in ca if (ca[c] + cb[c]) % 2 == 0}})
    tables = alignment.alignment_tables(ratings, votes=KNOWN, resampling=Resampling(300), group_by=())
    table = tables.alignment.set_index(["judge", "pool"])
    assert table.loc[("copy_a", "a"), ["mae", "mae_lo", "mae_hi"]].tolist() == [0.0, 0.0, 0.0]
    assert table.loc[("copy_a", "a"), "pearson"] == pytest.approx(1.0)
    assert table.loc[("copy_a", "a"), "qwk"] == pytest.approx(1.0)
    mae_b = np.mean([abs(ca[c] - cb[c]) for c in ca])
    assert table.loc[("copy_a", "b"), "mae"] == pytest.approx(mae_b)
    tilt = tables.tilt.set_index("judge")
    assert tilt.loc["copy_a", ["tilt", "tilt_lo", "tilt_hi"]].tolist() == [1.0, 1.0, 1.0]
    assert tilt.loc["copy_a", "n_tilt"] == 4 and tilt.loc["copy_a", "n_delta"] == 6
    assert tilt.loc["copy_a", "delta"] == pytest.approx(-mae_b)  # negative: closer to a
    assert tilt.loc["copy_b", ["tilt", "tilt_lo", "tilt_hi"]].tolist() == [-1.0, -1.0, -1.0]
    assert tilt.loc["copy_b", "delta"] == pytest.approx(mae_b)
    assert tilt.loc["midway", "tilt"] == 0.0 and tilt.loc["midway", "n_tilt"] == 4


def test_a_constant_rater_has_an_undefined_pearson_never_zero() -> None:
    ratings = ratings_frame({("flat", "default"): {cid: 4 for cid in POOL_A}})
    table = alignment.alignment_table(ratings, votes=KNOWN, resampling=Resampling(200), group_by=())
    assert table["pearson"].isna().all() and table["pearson_lo"].isna().all() and table["pearson_hi"].isna().all()
    assert table["mae"].notna().all() and table["n"].tolist() == [6, 6]
    c = [v[0] for v in POOL_A.values()]
    assert table["qwk"].iloc[0] == pytest.approx(cohen_kappa_score([4] * 6, c, weights="quadratic", labels=[1, 2, 3, 4, 5]))
    # a constant reference (every item rated 3 by the pool) is undefined the same way
    flat_pool = votes_frame({"a": {cid: [3, 3] for cid in POOL_A}})
    varied = ratings_frame({("j", "default"): {cid: v[0] for cid, v in POOL_A.items()}})
    assert alignment.alignment_table(varied, votes=flat_pool, resampling=Resampling(50), group_by=())["pearson"].isna().all()


def test_measures_match_numpy_scipy_and_sklearn_cell_by_cell() -> None:
    votes, ratings, items = random_study(3)
    tables = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(0))
    cons = votes.groupby(["candidate_id", "pool"])["value"].mean().unstack()
    anchors = {"anchor=high": ((cons >= 4) | cons.isna()).all(axis=1),
               "anchor=low": ((cons <= 2) | cons.isna()).all(axis=1)}
    anchors["anchor=contested"] = ~anchors["anchor=high"] & ~anchors["anchor=low"]
    culture = items.set_index("candidate_id")["culture"]
    groups = {"all": pd.Series(True, cons.index), **anchors,
              **{f"culture={v}": culture.reindex(cons.index) == v for v in ("east", "west")}}
    assert tables.alignment["group"].unique().tolist() == list(groups)
    checked = 0
    for row in tables.alignment.itertuples():
        rated = ratings[(ratings["judge"] == row.judge) & (ratings["condition"] == row.condition)].set_index("candidate_id")
        in_cell = cons.index[groups[row.group].to_numpy() & cons[row.pool].notna().to_numpy()]
        cell = rated.reindex(in_cell)
        assert row.abstained == (cell["status"] == "abstained").sum()
        assert row.failed == cell["status"].isin(["parse_fail", "runtime_fail"]).sum()
        ok = cell[cell["status"] == "ok"]
        r, c = ok["rating"].to_numpy(), cons.loc[ok.index, row.pool].to_numpy()
        assert row.n == len(r)
        if len(r) < 3:
            continue
        assert row.mae == pytest.approx(np.mean(np.abs(r - c)), abs=1e-12)
        constant = np.ptp(r) == 0 or np.ptp(c) == 0
        assert row.pearson == pytest.approx(np.nan if constant else stats.pearsonr(r, c).statistic, abs=1e-9, nan_ok=True)
        q = [half_up(v) for v in c]
        assert row.qwk == pytest.approx(cohen_kappa_score(r.astype(int), q, weights="quadratic", labels=[1, 2, 3, 4, 5]),
                                        abs=1e-9)
        assert row.floor_share == pytest.approx(np.mean(r <= 2))
        assert row.pool_floor_share == pytest.approx(np.mean(c <= 2))
        if (c <= 2).any():
            assert row.floor_recovery == pytest.approx(np.mean(r[c <= 2] <= 2))
        checked += 1
    assert checked > 40
    pair_groups = {**groups, "anchor=high": (cons >= 4).all(axis=1), "anchor=low": (cons <= 2).all(axis=1)}
    pair_groups["anchor=contested"] = cons.notna().all(axis=1) & ~pair_groups["anchor=high"] & ~pair_groups["anchor=low"]
    for row in tables.tilt.itertuples():
        rated = ratings[(ratings["judge"] == row.judge) & (ratings["condition"] == row.condition)
                        & (ratings["status"] == "ok")].set_index("candidate_id")
        both = cons.index[pair_groups[row.group].to_numpy() & cons.notna().all(axis=1).to_numpy()]
        both = both.intersection(rated.index)
        r, ca, cb = rated.loc[both, "rating"].to_numpy(), cons.loc[both, "a"].to_numpy(), cons.loc[both, "b"].to_numpy()
        assert row.n_delta == len(r)
        assert row.delta == pytest.approx(np.mean(np.abs(r - ca)) - np.mean(np.abs(r - cb)), abs=1e-12)
        differ = ca != cb
        assert row.n_tilt == differ.sum()
        t = np.clip((2 * r - ca - cb)[differ] / (ca - cb)[differ], -1, 1)
        assert row.tilt == pytest.approx(t.mean(), abs=1e-12)


def test_rounding_is_half_up_not_to_even() -> None:
    assert alignment.round_half_up(np.array([0.5, 1.5, 2.5, 3.5, 2.49999, 2.5 - 1e-15])).tolist() == [1, 2, 3, 4, 2, 3]


def test_bootstrap_intervals_match_a_loop_over_the_same_weights() -> None:
    votes = votes_frame({"a": {"i0": [5, 4], "i1": [1, 2], "i2": [4], "i3": [2, 3], "i4": [5], "i5": [3, 2], "i6": [4, 4]},
                         "b": {"i0": [5], "i1": [2], "i2": [2, 3], "i3": [4], "i4": [3, 4], "i5": [5], "i6": [1, 2]}})
    ratings = ratings_frame({("j", "default"): {"i0": 5, "i1": 2, "i2": 4, "i3": "abstained", "i4": 4, "i5": 3, "i6": 2}})
    items = pd.DataFrame({"candidate_id": [f"i{k}" for k in range(7)], "side": list("xxyxyyx")})
    tables = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(400, 7))
    cons = votes.groupby(["candidate_id", "pool"])["value"].mean().unstack()  # rows sorted by id: the weight order
    rated = ratings.set_index("candidate_id")["rating"].reindex(cons.index).to_numpy()
    weights = count_weights(np.random.default_rng(7), 400, len(cons))
    m = ~np.isnan(rated)
    side_x = (items.set_index("candidate_id")["side"].reindex(cons.index) == "x").to_numpy()
    draws = {"mae_a": [], "mae_b": [], "pearson_a": [], "delta": [], "tilt": [], "mae_a_x": []}
    for w in weights:
        idx = np.repeat(np.arange(len(cons)), w.astype(int))
        idx = idx[m[idx]]
        in_x = idx[side_x[idx]]
        draws["mae_a_x"].append(np.mean(np.abs(rated[in_x] - cons["a"].to_numpy()[in_x])) if len(in_x) else np.nan)
        r, ca, cb = rated[idx], cons["a"].to_numpy()[idx], cons["b"].to_numpy()[idx]
        draws["mae_a"].append(np.mean(np.abs(r - ca)) if len(r) else np.nan)
        draws["mae_b"].append(np.mean(np.abs(r - cb)) if len(r) else np.nan)
        draws["pearson_a"].append(np.corrcoef(r, ca)[0, 1] if len(r) > 1 and np.ptp(r) and np.ptp(ca) else np.nan)
        draws["delta"].append(draws["mae_a"][-1] - draws["mae_b"][-1])
        d = ca != cb
        draws["tilt"].append(np.clip((2 * r - ca - cb)[d] / (ca - cb)[d], -1, 1).mean() if d.any() else np.nan)
    expected = {k: np.nanpercentile(v, [2.5, 97.5]) for k, v in draws.items()}
    by_group = tables.alignment.set_index(["pool", "group"])
    assert by_group.loc[("a", "side=x"), ["mae_lo", "mae_hi"]].to_numpy() == pytest.approx(expected["mae_a_x"], abs=1e-5)
    table = tables.alignment[tables.alignment["group"] == "all"].set_index("pool")
    assert table.loc["a", ["mae_lo", "mae_hi"]].to_numpy() == pytest.approx(expected["mae_a"], abs=1e-5)
    assert table.loc["b", ["mae_lo", "mae_hi"]].to_numpy() == pytest.approx(expected["mae_b"], abs=1e-5)
    assert table.loc["a", ["pearson_lo", "pearson_hi"]].to_numpy() == pytest.approx(expected["pearson_a"], abs=1e-4)
    tilt = tables.tilt.iloc[0]
    assert tilt.group == "all"
    assert [tilt.delta_lo, tilt.delta_hi] == pytest.approx(expected["delta"], abs=1e-5)
    assert [tilt.tilt_lo, tilt.tilt_hi] == pytest.approx(expected["tilt"], abs=1e-5)


def test_intervals_contain_the_estimate_and_follow_the_seed() -> None:
    votes, ratings, items = random_study(5, n=150)
    first = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(600, 1))
    for table, names in ((first.alignment, ("mae", "pearson")), (first.tilt, ("delta", "tilt"))):
        for name in names:
            defined = table[name].notna() & (table["n"] >= 10 if "n" in table else table["n_delta"] >= 10)
            assert defined.sum() > 10
            assert (table.loc[defined, f"{name}_lo"] <= table.loc[defined, name] + 1e-6).all()
            assert (table.loc[defined, name] <= table.loc[defined, f"{name}_hi"] + 1e-6).all()
            assert (table.loc[defined, f"{name}_lo"] < table.loc[defined, f"{name}_hi"]).mean() > 0.9
    assert first.alignment.attrs == {"resamples": 600, "seed": 1} == first.tilt.attrs
    again = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(600, 1))
    other = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(600, 2))
    pd.testing.assert_frame_equal(first.alignment, again.alignment)
    assert not first.alignment["mae_lo"].equals(other.alignment["mae_lo"])
    # computed alone or in another chunking, the tables agree within the documented float32 tolerance;
    # 'all' does not depend on group_by
    close = {"check_exact": False, "rtol": 0.0, "atol": alignment.resample_tolerance(150)}
    pd.testing.assert_frame_equal(first.tilt, alignment.tilt_table(ratings, votes=votes, items=items, resampling=Resampling(600, 1)),
                                  **close)
    alone = alignment.alignment_table(ratings, votes=votes, resampling=Resampling(600, 1), group_by=())
    pd.testing.assert_frame_equal(alone, first.alignment[first.alignment["group"] == "all"].reset_index(drop=True), **close)


@pytest.mark.parametrize("weight_elements", [150, 150 * 7, 150 * 64])
def test_intervals_do_not_depend_on_the_chunking(monkeypatch, weight_elements) -> None:
    """Resample chunks of 1, 7 and 64 resamples give the one-chunk endpoints within `resample_tolerance`."""
    votes, ratings, items = random_study(5, n=150)
    whole = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(200, 3))
    monkeypatch.setattr(alignment, "WEIGHT_ELEMENTS", weight_elements)
    chunked = alignment.alignment_tables(ratings, votes=votes, items=items, resampling=Resampling(200, 3))
    close = {"check_exact": False, "rtol": 0.0, "atol": alignment.resample_tolerance(150)}
    pd.testing.assert_frame_equal(whole.alignment, chunked.alignment, **close)
    pd.testing.assert_frame_equal(whole.tilt, chunked.tilt, **close)


def test_abstentions_and_failures_are_counted_never_scored() -> None:
    ratings = ratings_frame({("j", "default"): {"i0": 5, "i1": "abstained", "i2": "parse_fail", "i3": "abstained",
                                                "i4": "runtime_fail", "i5": 3}})
    table = alignment.alignment_table(ratings, votes=KNOWN, resampling=Resampling(0), group_by=()).set_index("pool")
    assert table.loc["a", ["n", "abstained", "failed"]].tolist() == [2, 2, 2]
    assert table.loc["a", "mae"] == 0.0 and table.loc["b", "mae"] == pytest.approx(1.0)
    assert np.isnan(table.loc["a", "mae_lo"])  # no resamples asked: no interval


def test_an_item_without_a_rating_row_is_not_counted() -> None:
    ratings = ratings_frame({("j", "default"): {"i0": 5, "i1": 1}, ("k", "default"): {"i0": 5}})
    table = alignment.alignment_table(ratings, votes=KNOWN, resampling=Resampling(0), group_by=())
    assert table.set_index(["judge", "pool"]).loc[("k", "a"), ["n", "abstained", "failed"]].tolist() == [1, 0, 0]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("j", "default", "i0", 3.0, "unsure")], "field 'status' is 'unsure'"),
        ([("j", "default", "i0", np.nan, "ok")], "is empty although the status is 'ok'"),
        ([("j", "default", "i0", 3.0, "abstained")], "must be empty unless the status is 'ok'"),
        ([("j", "default", "i0", 3.5, "ok")], "is not an integer on the scale 1..5"),
        ([("j", "default", "i0", 6.0, "ok")], "is not an integer on the scale 1..5"),
        ([("j", "default", "i0", "four", "ok")], "is not a number"),
        ([("j", "default", "i0", 3.0, "ok"), ("j", "default", "i0", 4.0, "ok")], "a second rating of the same item"),
    ],
)
def test_bad_ratings_are_named_by_row_and_field(rows: list[tuple], message: str) -> None:
    ratings = pd.DataFrame(rows, columns=["judge", "condition", "candidate_id", "rating", "status"])
    with pytest.raises(ValueError, match=message) as err:
        alignment.alignment_table(ratings, votes=KNOWN, resampling=Resampling(0))
    assert "judge 'j'" in str(err.value) and "candidate 'i0'" in str(err.value)


def test_bad_references_and_options_are_refused() -> None:
    ratings = ratings_frame({("j", "default"): {"i0": 3}})
    with pytest.raises(ValueError, match="outside the scale 1..5"):
        alignment.alignment_table(ratings, votes=votes_frame({"a": {"i0": [0.5]}}), resampling=Resampling(0))
    with pytest.raises(ValueError, match="give votes, consensus or both"):
        alignment.alignment_table(ratings, resampling=Resampling(0))
    with pytest.raises(ValueError, match="missing column"):
        alignment.alignment_table(ratings.drop(columns="condition"), votes=KNOWN, resampling=Resampling(0))
    with pytest.raises(ValueError, match="'culture' is neither 'anchor' nor an attribute"):
        alignment.alignment_table(ratings, votes=KNOWN, resampling=Resampling(0), group_by=("culture",))
    with pytest.raises(ValueError, match="at least 4 points"):
        alignment.alignment_table(ratings, votes=KNOWN, resampling=Resampling(0), scale=(1, 3))


def test_votes_only_consensus_is_the_pool_mean_and_a_consensus_row_wins() -> None:
    votes = votes_frame({"a": {"i0": [1, 2, 4], "i1": [5, 4]}, "b": {"i0": [3]}})
    votes.loc[len(votes)] = ["i1", "stereotype", "a", "a9", 1.0]  # another outcome: ignored
    assert pool_consensus(votes).to_dict("list") == {
        "candidate_id": ["i0", "i0", "i1"], "pool": ["a", "b", "a"], "value": [7 / 3, 3.0, 4.5]}
    rows = pd.DataFrame({"candidate_id": ["i1", "i2"], "pool": ["a", "a"], "value": [2.0, 3.0]})
    mixed = pool_consensus(votes, rows).set_index(["candidate_id", "pool"])["value"]
    assert mixed.to_dict() == {("i0", "a"): 7 / 3, ("i0", "b"): 3.0, ("i1", "a"): 2.0, ("i2", "a"): 3.0}
    ratings = ratings_frame({("j", "default"): {"i0": 2, "i1": 4, "i2": 3}})
    table = alignment.alignment_table(ratings, votes=votes, consensus=rows, resampling=Resampling(0), group_by=()).set_index("pool")
    assert table.loc["a", "mae"] == pytest.approx((1 / 3 + 2 + 0) / 3)
    assert table.loc["b", "n"] == 1


def test_anchors_with_three_pools_use_every_pool_and_pairs_their_own_two() -> None:
    votes = votes_frame({"a": {"i0": [5], "i1": [4], "i2": [1]}, "b": {"i0": [4], "i1": [4], "i2": [2]},
                         "c": {"i0": [2], "i1": [5]}})
    ratings = ratings_frame({("j", "default"): {"i0": 4, "i1": 4, "i2": 2}})
    tables = alignment.alignment_tables(ratings, votes=votes, resampling=Resampling(0), group_by=("anchor",))
    n = tables.alignment.set_index(["pool", "group"])["n"]
    # i0 is contested (c says 2), i1 high by all three, i2 low by the two pools that rated it
    assert n[("a", "anchor=high")] == 1 and n[("a", "anchor=low")] == 1 and n[("a", "anchor=contested")] == 1
    pairs = tables.tilt.set_index(["pool_a", "pool_b", "group"])["n_delta"]
    assert pairs[("a", "b", "anchor=high")] == 2 and pairs[("a", "b", "anchor=contested")] == 0
    assert pairs[("a", "c", "anchor=contested")] == 1 and pairs[("a", "c", "all")] == 2


def test_table_columns_are_the_contract_and_one_pool_has_no_tilt() -> None:
    ratings = ratings_frame({("j", "default"): {"i0": 3}})
    only_a = votes_frame({"a": POOL_A})
    tables = alignment.alignment_tables(ratings, votes=only_a, resampling=Resampling(10))
    assert tuple(tables.alignment.columns) == alignment.ALIGNMENT_COLUMNS
    assert alignment.ALIGNMENT_COLUMNS[:15] == (
        "judge", "condition", "pool", "group", "n", "abstained", "mae", "mae_lo", "mae_hi", "pearson",
        "pearson_lo", "pearson_hi", "qwk", "floor_share", "pool_floor_share")
    assert tables.alignment["group"].tolist() == ["all", "anchor=high", "anchor=low", "anchor=contested"]
    assert tuple(tables.tilt.columns) == alignment.TILT_COLUMNS and tables.tilt.empty
    assert alignment.TILT_COLUMNS[:12] == ("judge", "condition", "pool_a", "pool_b", "group", "delta", "delta_lo",
                                           "delta_hi", "tilt", "tilt_lo", "tilt_hi", "n_tilt")


def wilcoxon_normal_p(d: np.ndarray) -> tuple[float, float]:
    """min(W+, W−) and the two-sided normal-approximation p-value with the tie correction, by hand."""
    d = d[d != 0]
    n = len(d)
    ranks = stats.rankdata(np.abs(d))
    w_plus = ranks[d > 0].sum()
    _, ties = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24 - (ties**3 - ties).sum() / 48
    z = (w_plus - n * (n + 1) / 4) / np.sqrt(var)
    return min(w_plus, n * (n + 1) / 2 - w_plus), 2 * stats.norm.sf(abs(z))


def test_paired_wilcoxon_matches_scipy_two_sample_call_and_a_direct_normal_approximation() -> None:
    votes, ratings, _ = random_study(11, n=160)
    table = alignment.paired_wilcoxon(ratings, votes=votes)
    assert tuple(table.columns) == alignment.WILCOXON_COLUMNS
    # 4 rater rows of pool a vs b, 2 judges x 2 pools of default vs persona
    assert len(table) == 4 + 4
    cons = votes.groupby(["candidate_id", "pool"])["value"].mean().unstack()
    ok = ratings[ratings["status"] == "ok"]
    for row in table.itertuples():
        ea = ok[(ok["judge"] == row.judge) & (ok["condition"] == row.condition_a)].set_index("candidate_id")["rating"]
        eb = ok[(ok["judge"] == row.judge) & (ok["condition"] == row.condition_b)].set_index("candidate_id")["rating"]
        ea = (ea - cons[row.pool_a].reindex(ea.index)).abs().dropna()
        eb = (eb - cons[row.pool_b].reindex(eb.index)).abs().dropna()
        both = ea.index.intersection(eb.index)
        x, y = ea[both].to_numpy(), eb[both].to_numpy()
        d = np.round(x - y, 9)
        assert row.n == len(both) and row.n_nonzero == np.count_nonzero(d)
        assert row.mean_diff == pytest.approx(np.mean(x - y))
        # consensus values are k/m with m <= 3 votes: 6 e is an exact integer, so scipy sees exact differences
        by_scipy = stats.wilcoxon(np.rint(6 * x), np.rint(6 * y))
        assert row.statistic == pytest.approx(by_scipy.statistic) and row.p_value == pytest.approx(by_scipy.pvalue)
        statistic, p = wilcoxon_normal_p(d)
        assert row.statistic == pytest.approx(statistic) and row.p_value == pytest.approx(p, rel=1e-9)


def test_paired_wilcoxon_without_any_difference_is_undefined() -> None:
    same = {cid: v[0] for cid, v in POOL_A.items()}
    ratings = ratings_frame({("j", "x"): same, ("j", "y"): same})
    table = alignment.paired_wilcoxon(ratings, votes=KNOWN)
    conditions = table[table["condition_a"] != table["condition_b"]]
    assert (conditions["n_nonzero"] == 0).all() and conditions["p_value"].isna().all()
    assert (conditions["mean_diff"] == 0).all() and (conditions["n"] == 6).all()
