"""The whole audit: against a loop-based reference, invariances, edge cases, the command."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, store
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import SelectionData
from audit_core.selection.policies import policy_picks
from benchmarks.synthetic import build_synthetic_db
from runners import analyze
from tests.support.selection_data import make_data, random_data


def reference(data: SelectionData, pick: np.ndarray) -> dict[str, float]:
    """Obviously-correct per-prompt loop over one policy's picks."""
    rows = []
    for p in range(data.n_prompts):
        if pick[p] < 0:
            continue
        h = [v for v in data.utility[p] if not math.isnan(v)]
        mean, best = sum(h) / len(h), max(h)
        chosen = data.utility[p, pick[p]]
        error = data.outcomes["stereotype"][p]
        errors = [v for v in error if not math.isnan(v)]
        rows.append({
            "country": data.prompts["country"][p],
            "regret": best - chosen,
            "gain": chosen - mean,
            "bmr": float(chosen < mean - 1e-12),
            "bmr_random": sum(v < mean - 1e-12 for v in h) / len(h),
            "best": float(chosen >= best - 1e-12),
            "stereotype_delta": error[pick[p]] - sum(errors) / len(errors),
        })
    frame = pd.DataFrame(rows)
    if frame.empty:
        return {"n": 0}
    by_country = frame.groupby("country")["regret"].mean()
    out = {k: frame[k].mean() for k in ("regret", "gain", "bmr", "bmr_random", "best", "stereotype_delta")}
    out.update(n=len(frame), worst_group_regret=by_country.max(), disparity=by_country.max() - by_country.min())
    return out


@pytest.fixture(scope="module")
def data() -> SelectionData:
    return random_data(n=60, seed=4)


@pytest.fixture(scope="module")
def result(data: SelectionData):
    return audit_selection(data, Resampling(300, 1))


def test_point_estimates_match_a_loop_reference(data: SelectionData, result) -> None:
    table = result.policies.set_index("policy")
    for name, pick in policy_picks(data).items():
        ref = reference(data, pick)
        row = table.loc[name]
        assert row["n"] == ref["n"], name
        if ref["n"] == 0:
            continue
        for key in ("regret", "gain", "bmr", "bmr_random", "best", "stereotype_delta", "worst_group_regret", "disparity"):
            assert row[key] == pytest.approx(ref[key], abs=1e-12), (name, key)
        assert row["coverage"] == pytest.approx(ref["n"] / data.n_prompts)
        assert row["gain"] == pytest.approx(row["random_regret"] - row["regret"], abs=1e-12)  # G = (h*−h̄) − R


def test_random_and_oracle_rows(result) -> None:
    table = result.policies.set_index("policy")
    assert table.loc["random", "gain"] == 0.0 and table.loc["random", "bmr_delta"] == 0.0
    assert table.loc["random", "bmr"] == pytest.approx(table.loc["random", "bmr_random"])
    assert table.loc["oracle", "regret"] == 0.0 and table.loc["oracle", "best"] == 1.0
    assert table.loc["oracle", "gain"] == pytest.approx(table.loc["random", "regret"])


def direct_interval(values: np.ndarray, resamples: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of a mean, straight from numpy: the defined values resampled at fixed n
    with rows of `default_rng(seed).integers(0, n, (B, n))`."""
    kept = values[~np.isnan(values)]
    means = kept[np.random.default_rng(seed).integers(0, len(kept), size=(resamples, len(kept)))].mean(axis=1)
    return tuple(np.quantile(means, [(1 - level) / 2, (1 + level) / 2]))


def per_prompt(data: SelectionData, pick: np.ndarray) -> dict[str, np.ndarray]:
    """Per-prompt regret, gain, random regret and stereotype delta of a pick, NaN where it abstains."""
    rows = np.arange(data.n_prompts)
    h, st = data.utility, data.outcomes["stereotype"]
    chosen = np.where(pick >= 0, h[rows, np.clip(pick, 0, None)], np.nan)
    best, mean = np.nanmax(h, axis=1), np.nanmean(h, axis=1)
    delta = np.where(pick >= 0, st[rows, np.clip(pick, 0, None)], np.nan) - np.nanmean(st, axis=1)
    sensitive = np.nanmax(st, axis=1) - np.nanmin(st, axis=1) > 1e-12
    return {"regret": best - chosen, "gain": chosen - mean, "random_regret": np.where(pick >= 0, best - mean, np.nan),
            "stereotype_delta": np.where(sensitive, delta, 0.0 * delta),
            "stereotype_sensitive_delta": np.where(sensitive, delta, np.nan)}


def test_a_policys_interval_is_a_direct_bootstrap_over_the_prompts_it_acts_on(data: SelectionData, result) -> None:
    table = result.policies.set_index("policy")
    picks = policy_picks(data)
    for name in ("a", "a agree>=3/3", "a+b agree rejected", "clip"):
        values = per_prompt(data, picks[name])
        for stat, v in values.items():
            lo, hi = direct_interval(v, 300, 1)
            assert table.loc[name, f"{stat}_lo"] == pytest.approx(lo, abs=1e-12), (name, stat)
            assert table.loc[name, f"{stat}_hi"] == pytest.approx(hi, abs=1e-12), (name, stat)
        lo, hi = direct_interval(values["stereotype_delta"], 300, 1, level=1 - 0.05 / 3)
        assert (table.loc[name, "stereotype_delta_lo_bonf"], table.loc[name, "stereotype_delta_hi_bonf"]) == \
            pytest.approx((lo, hi), abs=1e-12)
    # the gate against the ungated judge: a per-prompt difference on the prompts the gate keeps
    diff = per_prompt(data, picks["a agree>=2/3"])["regret"] - per_prompt(data, np.where(picks["a agree>=2/3"] >= 0,
                                                                                       picks["a"], -1))["regret"]
    assert (table.loc["a agree>=2/3", "regret_vs_ungated_lo"], table.loc["a agree>=2/3", "regret_vs_ungated_hi"]) == \
        pytest.approx(direct_interval(diff, 300, 1), abs=1e-12)


def test_country_intervals_resample_within_the_country_and_the_worst_group_within_each(data: SelectionData, result) -> None:
    regret = per_prompt(data, policy_picks(data)["a majority"])["regret"]
    country = data.prompts["country"].to_numpy()
    groups = result.groups.set_index(["policy", "country"])
    gen = np.random.default_rng(1)
    means = []
    for c in sorted(set(country)):
        own = regret[(country == c) & ~np.isnan(regret)]
        lo, hi = direct_interval(own, 300, 1)
        assert (groups.loc[("a majority", c), "regret_lo"], groups.loc[("a majority", c), "regret_hi"]) == \
            pytest.approx((lo, hi), abs=1e-12)
        means.append(own[gen.integers(0, len(own), size=(300, len(own)))].mean(axis=1))  # one generator, in turn
    row = result.policies.set_index("policy").loc["a majority"]
    expected = np.quantile(np.max(means, axis=0), [0.025, 0.975])
    assert (row["worst_group_regret_lo"], row["worst_group_regret_hi"]) == pytest.approx(tuple(expected), abs=1e-12)


def test_a_gates_kept_minus_rejected_side_resamples_all_prompts_jointly(data: SelectionData, result) -> None:
    picks = policy_picks(data)
    kept, rejected = (per_prompt(data, picks[name])["gain"] for name in ("b agree>=3/3", "b agree>=3/3 rejected"))
    index = np.random.default_rng(1).integers(0, data.n_prompts, size=(300, data.n_prompts))

    def side(values: np.ndarray) -> np.ndarray:
        drawn = values[index]
        with np.errstate(invalid="ignore"):  # a resample may draw none of the side's prompts
            return np.nansum(drawn, axis=1) / (~np.isnan(drawn)).sum(axis=1)

    row = result.policies.set_index("policy").loc["b agree>=3/3"]
    assert row["gain_vs_rejected"] == pytest.approx(np.nanmean(kept) - np.nanmean(rejected), abs=1e-12)
    expected = np.nanquantile(side(kept) - side(rejected), [0.025, 0.975])  # over resamples where both are defined
    assert (row["gain_vs_rejected_lo"], row["gain_vs_rejected_hi"]) == pytest.approx(tuple(expected), abs=1e-12)
    assert np.isnan(result.policies.set_index("policy").loc["a", "gain_vs_rejected"])  # not a gate


def test_cultural_rows_carry_the_chosen_and_random_means_of_their_subset(data: SelectionData, result) -> None:
    cultural = result.cultural.set_index(["policy", "outcome", "subset"])
    stereotype = data.outcomes["stereotype"]
    sensitive = np.nanmax(stereotype, axis=1) - np.nanmin(stereotype, axis=1) > 1e-12
    pick = policy_picks(data)["a"]
    acted = pick >= 0
    chosen = stereotype[np.arange(data.n_prompts), np.clip(pick, 0, None)]
    for subset, members in (("all", acted), ("sensitive", acted & sensitive)):
        row = cultural.loc[("a", "stereotype", subset)]
        assert row["n"] == members.sum()
        assert row["chosen"] == pytest.approx(chosen[members].mean(), abs=1e-12)
        assert row["random"] == pytest.approx(np.nanmean(stereotype, axis=1)[members].mean(), abs=1e-12)
        assert row["delta"] == pytest.approx(row["chosen"] - row["random"], abs=1e-12)


def test_intervals_contain_point_estimates(result) -> None:
    table = result.policies[result.policies["n"] > 5]
    for stat in ("regret", "gain", "utility", "bmr"):
        assert (table[f"{stat}_lo"] <= table[stat] + 1e-12).all(), stat
        assert (table[stat] <= table[f"{stat}_hi"] + 1e-12).all(), stat
    errors = table["stereotype_delta_hi_bonf"] - table["stereotype_delta_lo_bonf"]
    assert (errors >= table["stereotype_delta_hi"] - table["stereotype_delta_lo"] - 1e-12).all()


def test_country_intervals_contain_their_estimates_and_have_width(result) -> None:
    groups = result.groups[result.groups["n"] > 5]
    for stat in ("regret", "gain"):
        assert (groups[f"{stat}_lo"] <= groups[stat] + 1e-12).all(), stat
        assert (groups[stat] <= groups[f"{stat}_hi"] + 1e-12).all(), stat
    assert (groups["regret_hi"] > groups["regret_lo"]).any()


def test_same_seed_same_result_and_seed_recorded(data: SelectionData) -> None:
    first = audit_selection(data, Resampling(200, 9))
    again = audit_selection(data, Resampling(200, 9))
    pd.testing.assert_frame_equal(first.policies, again.policies)
    pd.testing.assert_frame_equal(first.groups, again.groups)
    assert first.to_summary()["seed"] == 9 and first.to_summary()["resamples"] == 200
    other = audit_selection(data, Resampling(200, 10))
    assert not np.allclose(first.policies["regret_lo"], other.policies["regret_lo"])


def permuted(data: SelectionData, rows: np.ndarray, cols: np.ndarray) -> SelectionData:
    """The same dataset with prompts reordered and every pool's canonical columns relabelled."""
    inverse = np.argsort(cols)
    width = data.mask.shape[1]
    remap = lambda pick: np.where(pick >= 0, inverse[np.clip(pick, 0, width - 1)], pick)  # noqa: E731
    return SelectionData(
        dataset_id=data.dataset_id,
        prompts=data.prompts.iloc[rows].reset_index(drop=True),
        candidate_ids=data.candidate_ids[rows][:, cols],
        source_models=data.source_models[rows][:, cols],
        mask=data.mask[rows][:, cols],
        outcomes={k: v[rows][:, cols] for k, v in data.outcomes.items()},
        picks={k: remap(v[rows]) for k, v in data.picks.items()},
        slots={k: v[rows] for k, v in data.slots.items()},
        statuses={k: v[rows] for k, v in data.statuses.items()},
        scores={k: v[rows][:, cols] for k, v in data.scores.items()},
    )


def test_shuffling_prompts_and_candidate_columns_preserves_results() -> None:
    # full pools of distinct values, so no tie-break depends on the column order
    rng = np.random.default_rng(8)
    n = 50
    h = rng.permuted(np.tile(np.arange(4) / 4, (n, 1)), axis=1)
    picks = {"a": rng.integers(0, 4, size=(n, 3)), "b": rng.integers(0, 4, size=(n, 3))}
    for judge in picks:
        picks[judge][:, 1] = picks[judge][:, 0]  # never a tied majority: tie-breaks follow canonical order
    extra = {"stereotype": rng.random((n, 4)), "missing_explicit": rng.random((n, 4)), "missing_implicit": rng.random((n, 4))}
    base = make_data(h, picks, [f"c{i % 3}" for i in range(n)], extra, scores={"clip": rng.random((n, 4))})
    shuffled = permuted(base, rng.permutation(n), np.array([2, 0, 3, 1]))
    one, two = audit_selection(base, Resampling(0)), audit_selection(shuffled, Resampling(0))
    columns = ["policy", "n", "regret", "gain", "bmr", "bmr_random", "best", "worst_group_regret",
               "disparity", "stereotype_delta", "missing_explicit_sensitive_delta"]
    pd.testing.assert_frame_equal(one.policies[columns], two.policies[columns], check_exact=False, atol=1e-12)
    pd.testing.assert_frame_equal(one.judges.drop(columns=["first_slot", "chi2", "chi2_p"]),
                                  two.judges.drop(columns=["first_slot", "chi2", "chi2_p"]))


def test_a_judge_that_never_answers() -> None:
    h = np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6]])
    data = make_data(h, {"mute": np.full((2, 2), -1), "ok": np.array([[2, 2], [0, 1]])}, countries=["x", "y"])
    result = audit_selection(data, Resampling(50))
    table = result.policies.set_index("policy")
    assert table.loc["mute", "n"] == 0 and table.loc["mute", "coverage"] == 0.0
    assert np.isnan(table.loc["mute", "regret"]) and np.isnan(table.loc["mute", "regret_lo"])
    assert np.isnan(table.loc["mute", "worst_group_regret"]) and table.loc["mute", "countries_covered"] == 0
    judge = result.judges.set_index("judge").loc["mute"]
    assert judge["valid"] == 0 and judge["failed"] == 4 and np.isnan(judge["flip_rate"])
    # zero-coverage groups are reported with coverage 0 and no risk, not zero risk
    groups = result.groups.set_index(["policy", "country"])
    assert groups.loc[("ok agree>=2/2", "y"), "coverage"] == 0.0
    assert np.isnan(groups.loc[("ok agree>=2/2", "y"), "regret"])
    json.dumps(result.to_summary())


def test_gates_table_reports_kept_and_rejected_next_to_random_and_ungated(result) -> None:
    gates_table = result.gates
    policies = result.policies.set_index("policy")
    assert set(gates_table["side"]) == {"kept", "rejected"}
    for gate, part in gates_table.groupby("gate"):
        kept, rejected = part.set_index("side").loc["kept"], part.set_index("side").loc["rejected"]
        assert kept["n"] == policies.loc[gate, "n"] and rejected["n"] == policies.loc[f"{gate} rejected", "n"]
        assert kept["random_regret"] == pytest.approx(policies.loc[gate, "random_regret"])
        assert kept["regret_vs_ungated"] == pytest.approx(kept["regret"] - kept["ungated_regret"], abs=1e-12)


def test_risk_coverage_has_every_threshold(data: SelectionData, result) -> None:
    rc = result.risk_coverage
    for judge in data.judges:
        part = rc[(rc["judge"] == judge) & rc["kind"].isin(["judge", "majority", "order_gate"])]
        assert part["threshold"].tolist() == [0, 1, 2, 3]
        assert (np.diff(part["coverage"].to_numpy()[1:]) <= 0).all()


def test_positions_and_shares_are_fractions(result) -> None:
    pos = result.positions
    assert ((pos["share"] >= 0) & (pos["share"] <= 1)).all()
    pooled = pos[pos["m"].isna()]
    for _, part in pooled.groupby("judge"):
        assert part["share"].sum() == pytest.approx(1.0) and part["uniform"].sum() == pytest.approx(1.0)


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("db") / "synthetic.duckdb"
    build_synthetic_db(path, n_prompts=300, n_judges=3, n_orders=3, seed=2, dataset_id="syn")
    return str(path)


def test_synthetic_dataset_loads_and_audits(synthetic_db: str) -> None:
    from audit_core.selection.data import load_selection_data

    con = store.connect(synthetic_db, read_only=True)
    data = load_selection_data(con, "syn")
    con.close()
    assert data.n_prompts == 300 and len(data.judges) == 3 and data.scorers == ["clip"]
    assert set(data.pool_sizes) == {3, 4}
    result = audit_selection(data, Resampling(100))
    first = result.judges.set_index("judge")["first_slot"]
    assert first["slot_a"] > first["steady"]  # the slot-A judge shows its bias


def test_analyze_command_writes_summary_and_tables(synthetic_db: str, tmp_path) -> None:
    out = tmp_path / "out"
    assert analyze.main(["--db", synthetic_db, "--dataset", "syn", "--out", str(out), "--resamples", "50", "--seed", "3"]) == 0
    for name in ("policies", "positions", "groups", "cultural", "risk_coverage", "gates", "judges", "slices"):
        assert (out / f"{name}.csv").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 3 and summary["resamples"] == 50
    row = summary["policies"][2]
    for key in ("policy", "n", "coverage", "utility", "regret", "regret_ci", "gain", "gain_ci", "bmr",
                "bmr_random", "best", "worst_group_regret"):
        assert key in row
    judge = summary["judges"]["slot_a"]
    for key in ("calls", "valid", "first_slot", "first_slot_uniform", "flip_rate", "slot_shares"):
        assert key in judge
    assert all(0 <= v <= 1 for v in judge["slot_shares"].values())


def test_analyze_command_rejects_unknown_inputs(synthetic_db: str, tmp_path, capsys) -> None:
    assert analyze.main(["--db", synthetic_db, "--dataset", "nope", "--out", str(tmp_path)]) == 2
    assert "dataset 'nope' is not in" in capsys.readouterr().err
    assert analyze.main(["--db", str(tmp_path / "missing.duckdb"), "--dataset", "x", "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_dataset_without_judges_still_has_every_table() -> None:
    data = make_data(np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6]]), {}, countries=[None, None])
    result = audit_selection(data, Resampling(20))
    assert result.policies["policy"].tolist() == ["random", "oracle"]
    for name, frame in result.tables().items():
        assert len(frame.columns) > 0, name
    assert result.groups["country"].tolist() == ["(none)", "(none)"]
    json.dumps(result.to_summary())
