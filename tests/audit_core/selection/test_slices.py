"""slices.csv: every policy's measures within each value of a prompt attribute."""

from __future__ import annotations

import dataclasses

import duckdb
import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling
from audit_core.errors import InputError
from audit_core.selection import slices
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.selection.policies import policy_picks
from audit_core.selection.position import range_tertiles
from runners import analyze
from tests.support.app import build_app_db, open_app
from tests.support.selection_data import make_data, random_data

RESAMPLES = 200


@pytest.fixture(scope="module")
def data() -> SelectionData:
    base = random_data(n=48, seed=11)
    rng = np.random.default_rng(2)
    variance = np.where(base.mask & (rng.random(base.mask.shape) < 0.8), rng.choice([0.0, 1 / 16, 1 / 9, 0.25], base.mask.shape),
                        np.nan)
    prompts = base.prompts.assign(split=np.where(np.arange(base.n_prompts) % 4 == 0, "dev", "main"))
    return dataclasses.replace(base, vote_variance=variance, prompts=prompts)


@pytest.fixture(scope="module")
def result(data: SelectionData):
    return audit_selection(data, Resampling(RESAMPLES, 3), by=["split"])


def labels(data: SelectionData, name: str) -> np.ndarray:
    """Each prompt's value in slice `name`, recomputed from the definitions."""
    h = data.utility
    if name == "all":
        return np.full(data.n_prompts, "all", dtype=object)
    if name in ("country", "category", "split"):
        return data.prompts[name].to_numpy(dtype=object)
    if name == "pool_size":
        return data.pool_sizes.astype(str).astype(object)
    if name == "best":
        top = [(row[~np.isnan(row)] == np.nanmax(row)).sum() for row in h]
        return np.array(["unique" if t == 1 else "tied" for t in top], dtype=object)
    if name == "consensus":
        disagreement = np.array([np.mean(row[~np.isnan(row)]) if (~np.isnan(row)).any() else np.nan
                                 for row in data.vote_variance])
        split = np.where(disagreement < np.nanmedian(disagreement), "high", "low")
        return np.where(np.isnan(disagreement), slices.NONE, split).astype(object)
    assert name == "range"
    return range_tertiles(np.nanmax(h, axis=1) - np.nanmin(h, axis=1))


def test_columns_are_the_contract_and_every_slice_is_there(result) -> None:
    assert list(result.slices.columns) == slices.SLICE_COLUMNS
    assert list(dict.fromkeys(result.slices["slice"])) == [*slices.BUILT_IN, "split"]
    assert result.tables()["slices"] is result.slices
    assert result.to_summary()["slices"]["split"] == {"dev": 12, "main": 36}


def test_every_value_matches_a_loop_over_its_prompts(data: SelectionData, result) -> None:
    table = result.slices.set_index(["slice", "value", "policy"])
    h, stereotype = data.utility, data.outcomes["stereotype"]
    picks = policy_picks(data)
    for name in (*slices.BUILT_IN, "split"):
        values = labels(data, name)
        for policy in ("a", "b agree>=2/3", "a+clip agree rejected"):
            pick = picks[policy]
            for value in sorted(set(values)):
                members = values == value
                row = table.loc[(name, value, policy)]
                acted = members & (pick >= 0)
                assert row["n"] == acted.sum() and row["coverage"] == pytest.approx(acted.sum() / members.sum())
                if not acted.any():
                    continue
                p = np.flatnonzero(acted)
                chosen, mean, best = h[p, pick[p]], np.nanmean(h[p], axis=1), np.nanmax(h[p], axis=1)
                below = np.array([(r[~np.isnan(r)] < m - 1e-12).mean() for r, m in zip(h[p], mean)])
                expected = {
                    "regret": best - chosen, "gain": chosen - mean, "random_regret": best - mean,
                    "bmr": (chosen < mean - 1e-12).astype(float), "bmr_random": below,
                    "best": (chosen >= best - 1e-12).astype(float),
                    "stereotype_delta": stereotype[p, pick[p]] - np.nanmean(stereotype[p], axis=1),
                }
                for stat, v in expected.items():
                    assert row[stat] == pytest.approx(v.mean(), abs=1e-12), (name, value, policy, stat)


def test_intervals_resample_the_policys_prompts_within_the_value_at_fixed_n(data: SelectionData, result) -> None:
    table = result.slices.set_index(["slice", "value", "policy"])
    pick = policy_picks(data)["a majority"]
    h = data.utility
    for name in ("pool_size", "best"):
        values = labels(data, name)
        for value in sorted(set(values)):
            p = np.flatnonzero((values == value) & (pick >= 0))
            regret = np.nanmax(h[p], axis=1) - h[p, pick[p]]
            draws = np.random.default_rng(3).integers(0, len(p), size=(RESAMPLES, len(p)))
            expected = np.quantile(regret[draws].mean(axis=1), [0.025, 0.975])
            row = table.loc[(name, value, "a majority")]
            assert (row["regret_lo"], row["regret_hi"]) == pytest.approx(tuple(expected), abs=1e-12), (name, value)


def test_a_value_the_policy_never_acts_on_has_zero_coverage_not_zero_risk() -> None:
    h = np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6], [0.3, 0.3, 0.8], [0.0, 1.0, 0.5]])
    picks = {"j": np.array([[2], [0], [-1], [-1]])}  # country y: no valid pick at all
    data = make_data(h, picks, countries=["x", "x", "y", "y"], extra={"stereotype": np.zeros((4, 3))})
    rows = audit_selection(data, Resampling(50)).slices.set_index(["slice", "value", "policy"])
    empty = rows.loc[("country", "y", "j")]
    assert empty["n"] == 0 and empty["coverage"] == 0.0
    for column in ("regret", "regret_lo", "regret_hi", "gain", "gain_lo", "bmr", "best", "random_regret",
                   "random_regret_hi", "stereotype_delta", "stereotype_delta_lo"):
        assert np.isnan(empty[column]), column
    assert rows.loc[("country", "y", "random"), "regret"] == pytest.approx(np.mean([0.8 - 1.4 / 3, 0.5]))  # h* − h̄
    assert rows.loc[("country", "x", "j"), "coverage"] == 1.0


def test_consensus_splits_at_the_median_with_ties_going_to_low() -> None:
    variance = np.array([[0.0, 0.0], [0.25, np.nan], [0.0, 0.5], [np.nan, np.nan], [0.1, 0.1]])
    disagreement = slices.prompt_disagreement(dataclasses.replace(make_data(np.zeros((5, 2))), vote_variance=variance))
    np.testing.assert_allclose(disagreement, [0.0, 0.25, 0.25, np.nan, 0.1])
    # median of (0, .25, .25, .1) is 0.175: strictly below is high; the prompt without votes has no value
    assert slices.consensus_labels(disagreement).tolist() == ["high", "low", "low", None, "high"]
    assert slices.consensus_labels(np.array([0.1, 0.1, 0.3])).tolist() == ["low", "low", "low"]  # median 0.1: ties low


def test_best_and_range_labels() -> None:
    h = np.array([[1.0, 0.5, 0.5], [1.0, 1.0, 0.0], [0.2, 0.2, np.nan], [0.0, 0.5, 0.9]])
    assert slices.best_labels(h).tolist() == ["unique", "tied", "tied", "unique"]
    spread = np.array([0.5, 1.0, 0.0, 0.9])
    assert slices.range_labels(h).tolist() == range_tertiles(spread).tolist()
    part = slices.partition("best", slices.best_labels(h), order=["unique", "tied"])
    assert part.values == ["unique", "tied"] and part.sizes.tolist() == [2, 2]
    missing = slices.partition("x", ["b", None, "a", "b"])
    assert missing.values == ["a", "b", slices.NONE] and missing.sizes.tolist() == [1, 2, 1]


def test_without_votes_the_consensus_slice_is_left_out_and_said_so() -> None:
    result = audit_selection(random_data(n=20, seed=1), Resampling(0))
    assert "consensus" not in set(result.slices["slice"])
    assert any("consensus slice left out" in note for note in result.notes)


def test_an_unknown_slice_column_is_named() -> None:
    with pytest.raises(InputError, match="'colour' is not a prompt attribute"):
        audit_selection(random_data(n=10, seed=1), Resampling(0), by=["colour"])


def test_votes_load_as_their_population_variance(tmp_path) -> None:
    db = build_app_db(tmp_path / "app.duckdb", tmp_path / "img", images=False)
    con = duckdb.connect(str(db), read_only=True)
    try:
        data = load_selection_data(con, "tiny")
        votes = con.execute("SELECT candidate_id, value FROM votes WHERE outcome = 'alignment'").df()
    finally:
        con.close()
    expected = votes.groupby("candidate_id")["value"].agg(lambda v: np.var(v.to_numpy()) if len(v) >= 2 else np.nan)
    loaded = pd.Series(data.vote_variance[data.mask], index=data.candidate_ids[data.mask])
    pd.testing.assert_series_equal(loaded.reindex(expected.index), expected, check_names=False, atol=1e-15)
    assert loaded.notna().any()


def test_analyze_by_adds_a_slice_and_rejects_an_unknown_column(tmp_path, capsys) -> None:
    db = build_app_db(tmp_path / "app.duckdb", tmp_path / "img", images=False)
    out = tmp_path / "out"
    assert analyze.main(["--db", str(db), "--dataset", "tiny", "--out", str(out), "--resamples", "20", "--by", "split"]) == 0
    written = pd.read_csv(out / "slices.csv")
    assert list(written.columns) == slices.SLICE_COLUMNS and "split" in set(written["slice"])
    bad = tmp_path / "bad"
    assert analyze.main(["--db", str(db), "--dataset", "tiny", "--out", str(bad), "--by", "colour"]) == 2
    err = capsys.readouterr().err
    assert "'colour' is not a prompt attribute" in err and "Traceback" not in err
    assert not bad.exists()


def test_the_overview_and_judge_pages_follow_the_slice_picker_in_the_url(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("JUDGE_AUDIT_DB", raising=False)
    db = build_app_db(tmp_path / "app.duckdb", tmp_path / "img", images=False)
    pages = {}
    for page in ("overview", "judges"):
        at = open_app({"db": str(db), "page": page, "slice": "category"})
        assert at.selectbox(key="slice").value == "category" and at.query_params["slice"] == "category"
        pages[page] = at
    chart = pages["overview"].get("plotly_chart")
    assert any("Regret by category" in c.proto.spec for c in chart)
    (table,) = [d.value for d in pages["judges"].dataframe if list(d.value.columns[:1]) == ["category"]]
    # the page shows text cells (app_ui.draw.table): the slice's values, their prompt counts, each judge's gain
    assert list(table["category"]) == ["festivals", "weddings"] and list(table["prompts"]) == ["8", "4"]
    assert list(table.columns) == ["category", "prompts", "alpha", "beta"]
