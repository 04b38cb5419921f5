"""Position detail: flips by range and by near-ties with fixed-n intervals, generator × slot
choice rates, and each generator's part in the order-0 stereotype difference.

Published values come from "When the Judge Acts" (GitHub seochan99/JudgeActs),
results/main/review_extras.json ("difficulty", "stereotype_decomposition") and the
tables it prints, paper/generated/appendix_extras_{difficulty,gen_slot,stereo_generator}.tex.
The study bootstraps each group with a generator seeded afresh (seed 20261002, 10,000
resamples) over its prompts in the order of data/derived/main.jsonl; with that seed and
that order the same draws are made here, so its intervals reproduce exactly.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling
from audit_core.selection import position
from audit_core.selection.data import SelectionData
from audit_core.selection.debiased import ordered_calls
from tests.support.paths import JUDGEACTS_MAIN as JUDGEACTS
from tests.support.selection_data import make_data

STUDY_SEED = 20261002


def direct_interval(values: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap by explicit index draws, the obvious way."""
    values = np.asarray(values, dtype=float)
    index = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)), dtype=np.int64)
    lo, hi = np.percentile(values[index].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


# ranges 0, .2, .4, .5, .7, 1.0: tertile cuts 1/3 and 17/30, so low = {0, .2}, mid = {.4, .5}, high = {.7, 1}
RANGE_H = np.array([
    [0.5, 0.5, 0.5], [0.2, 0.4, 0.3], [0.1, 0.5, 0.3], [0.0, 0.5, 0.2], [0.2, 0.9, 0.5], [0.0, 1.0, 0.5],
    [0.5, 0.5, 0.5], [0.1, 0.3, 0.2], [0.6, 1.0, 0.8], [0.5, 1.0, 0.7], [0.3, 1.0, 0.5], [0.0, 1.0, 0.5],
])


def test_flip_by_range_prints_the_observed_bounds_not_the_cut_points() -> None:
    picks = np.zeros((12, 3), dtype=int)
    picks[[1, 2, 4], 2] = 1  # flips: one in low, one in mid, one in high
    picks[5] = -1  # one high prompt never parses
    table = position.flip_by_range(make_data(RANGE_H, {"j": picks}), "j", Resampling(500, 3)).set_index("tertile")
    assert table.index.tolist() == ["low", "mid", "high"]
    assert table["range_lo"].tolist() == pytest.approx([0.0, 0.4, 0.7])
    assert table["range_hi"].tolist() == pytest.approx([0.2, 0.5, 1.0])
    assert table["prompts"].tolist() == [4, 4, 4] and table["parsed"].tolist() == [4, 4, 3]
    assert table["flip_rate"].tolist() == pytest.approx([0.25, 0.25, 1 / 3])


def test_flip_intervals_resample_each_group_at_fixed_n_with_the_seed() -> None:
    rng = np.random.default_rng(5)
    h = np.round(rng.random((90, 4)) * 6) / 6
    picks = rng.integers(0, 4, size=(90, 3))
    picks[rng.random((90, 3)) < 0.1] = -1
    data = make_data(h, {"j": picks})
    flip = position.flips(np.where(picks >= 0, picks, -1))
    by_range = position.flip_by_range(data, "j", Resampling(2000, 11)).set_index("tertile")
    labels = position.range_tertiles(h.max(axis=1) - h.min(axis=1))
    for name, row in by_range.iterrows():
        values = flip[(labels == name) & ~np.isnan(flip)]
        assert row["parsed"] == len(values) and row["flip_rate"] == pytest.approx(values.mean())
        assert (row["flip_rate_lo"], row["flip_rate_hi"]) == pytest.approx(direct_interval(values, 2000, 11), abs=1e-12)
    ties = position.flip_by_near_ties(data, "j", Resampling(2000, 11)).set_index("near_ties")
    counts = position.near_tie_counts(h)
    assert ties["prompts"].sum() == 90
    for k, row in ties.iterrows():
        values = flip[(counts == k) & ~np.isnan(flip)]
        assert row["prompts"] == (counts == k).sum() and row["parsed"] == len(values)
        assert (row["flip_rate_lo"], row["flip_rate_hi"]) == pytest.approx(direct_interval(values, 2000, 11), abs=1e-12)


def direct_first_slot_interval(data, judge: str, resamples: int, seed: int) -> tuple[float, float]:
    """Prompt-level percentile bootstrap of the first-slot share, the obvious way: draw prompts
    (those with a valid call), then slot-A picks over valid calls of the drawn prompts."""
    valid = data.picks[judge] >= 0
    first = (valid & (data.slots[judge] == 0)).sum(axis=1)[valid.any(axis=1)]
    calls = valid.sum(axis=1)[valid.any(axis=1)]
    index = np.random.default_rng(seed).integers(0, len(calls), size=(resamples, len(calls)), dtype=np.int64)
    lo, hi = np.percentile(first[index].sum(axis=1) / calls[index].sum(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def judge_data(n: int, seed: int):
    """n prompts of 3–4 images, a judge in 3 orders preferring slot A, some calls failed, one prompt never called."""
    rng = np.random.default_rng(seed)
    h = np.round(rng.random((n, 4)) * 6) / 6
    h[: n // 3, 3] = np.nan
    picks = np.where(rng.random((n, 3)) < 0.4, np.arange(3)[None, :], rng.integers(0, 3, size=(n, 3)))  # slot A often
    picks[rng.random((n, 3)) < 0.1] = -1
    picks[0] = -2
    return make_data(h, {"j": picks})


def test_judge_intervals_match_a_direct_prompt_level_bootstrap() -> None:
    data = judge_data(90, 4)
    row = position.judge_summary(data, "j", Resampling(2000, 7))
    assert position.JUDGE_COLUMNS[-4:] == ["first_slot_lo", "first_slot_hi", "flip_rate_lo", "flip_rate_hi"]
    assert list(row) == position.JUDGE_COLUMNS
    assert row["first_slot_lo"] < row["first_slot"] < row["first_slot_hi"]
    assert (row["first_slot_lo"], row["first_slot_hi"]) == pytest.approx(
        direct_first_slot_interval(data, "j", 2000, 7), abs=1e-12)
    flip = position.flips(np.where(data.picks["j"] >= 0, data.picks["j"], -1))
    assert (row["flip_rate_lo"], row["flip_rate_hi"]) == pytest.approx(
        direct_interval(flip[~np.isnan(flip)], 2000, 7), abs=1e-12)
    none = position.judge_summary(data, "j", Resampling(0))
    assert np.isnan([none[k] for k in position.JUDGE_COLUMNS[-4:]]).all()


def test_first_slot_interval_above_the_exact_draws_has_the_same_distribution() -> None:
    data = judge_data(3000, 5)  # above bootstrap.EXACT_DRAWS_UP_TO: multinomial counts of (slot-A picks, valid calls)
    row = position.judge_summary(data, "j", Resampling(4000, 2))
    direct = direct_first_slot_interval(data, "j", 4000, 2)
    assert (row["first_slot_lo"], row["first_slot_hi"]) == pytest.approx(direct, abs=0.002)
    assert row["first_slot_hi"] - row["first_slot_lo"] == pytest.approx(direct[1] - direct[0], rel=0.1)


def test_near_ties_count_the_best_and_everything_within_five_hundredths() -> None:
    h = np.array([[1.0, 0.96, 0.9, np.nan], [1.0, 0.95, 0.95, 0.2], [1.0, 0.5, 0.5, np.nan], [0.7, 0.7, 0.7, 0.7]])
    assert position.near_tie_counts(h).tolist() == [2, 3, 1, 4]
    picks = np.array([[0, 1], [0, 0], [-1, 2], [3, 3]])
    table = position.flip_by_near_ties(make_data(h, {"j": picks}), "j", Resampling(200))
    assert table.columns.tolist() == position.NEAR_TIE_COLUMNS
    assert table["near_ties"].tolist() == [1, 2, 3, 4]
    assert table["parsed"].tolist() == [0, 1, 1, 1]
    assert np.isnan(table.loc[0, "flip_rate"]) and np.isnan(table.loc[0, "flip_rate_lo"])
    assert table["flip_rate"].tolist()[1:] == [1.0, 0.0, 0.0]
    assert (table.loc[1, "flip_rate_lo"], table.loc[1, "flip_rate_hi"]) == (1.0, 1.0)


def test_no_resamples_gives_no_interval() -> None:
    picks = np.zeros((12, 2), dtype=int)
    table = position.flip_by_range(make_data(RANGE_H, {"j": picks}), "j", Resampling(0))
    assert table["flip_rate"].tolist() == [0.0, 0.0, 0.0] and table["flip_rate_lo"].isna().all()


def calls_frame(rows: list[tuple[str, int, list[str], str, str | None]]) -> pd.DataFrame:
    """Call rows shaped like `store.load_calls`: (prompt, order, slot ids, status, chosen id)."""
    return pd.DataFrame(
        [{"judge": "j", "prompt_id": p, "order_index": k, "slot_candidate_ids": ids, "status": status,
          "chosen_candidate_id": chosen, "seconds": np.nan} for p, k, ids, status, chosen in rows]
    )


def test_generator_slot_rates_follow_the_recorded_slot_orders() -> None:
    # two pools (SD35, flux, gpt-image [, imagegen3]) shown in orders that are not rotations
    # the judge's picks as the calls below make them: canonical index, -1 for the parse failure
    data = make_data(np.array([[0.1, 0.5, 0.9, np.nan], [0.2, 0.4, 0.6, 0.8]]), {"j": np.array([[0, 0], [3, -1]])})
    a, b = data.candidate_ids[0, :3].tolist(), data.candidate_ids[1].tolist()
    calls = calls_frame([
        ("p000", 0, [a[0], a[1], a[2]], "ok", a[0]),
        ("p000", 1, [a[1], a[0], a[2]], "recovered", a[0]),  # a swap, not a rotation
        ("p001", 0, [b[3], b[2], b[1], b[0]], "ok", b[3]),
        ("p001", 1, [b[0], b[1], b[2], b[3]], "parse_fail", None),  # invalid: not counted
    ])
    table = position.generator_slot_table(data, "j", ordered_calls(data, calls)["j"]).set_index(["generator", "slot"])
    assert table.columns.tolist() == ["judge", "presented", "chosen", "rate"]
    assert table.loc[("SD35", "A"), ["presented", "chosen"]].tolist() == [1, 1]
    assert table.loc[("SD35", "B"), ["presented", "chosen"]].tolist() == [1, 1]
    assert table.loc[("SD35", "D"), ["presented", "chosen"]].tolist() == [1, 0]
    assert table.loc[("flux", "A"), ["presented", "chosen"]].tolist() == [1, 0]
    assert table.loc[("imagegen3", "A"), ["presented", "chosen", "rate"]].tolist() == [1, 1, 1.0]
    assert table.loc[("imagegen3", "B"), "presented"] == 0 and np.isnan(table.loc[("imagegen3", "B"), "rate"])
    assert table.loc[("SD35", "all"), ["presented", "chosen"]].tolist() == [3, 2]
    assert table.loc[("SD35", "all"), "rate"] == pytest.approx(2 / 3)
    # every valid call shows each of its images once
    assert table.xs("all", level="slot")["presented"].sum() == 3 + 3 + 4


def test_generator_table_splits_the_order0_stereotype_difference_by_generator() -> None:
    rng = np.random.default_rng(2)
    n = 60
    h = rng.random((n, 4))
    h[:20, 3] = np.nan  # a third of the pools have three images
    stereotype = np.round(rng.random((n, 4)) * 3) / 3
    picks = rng.integers(0, 3, size=(n, 3))
    picks[5, 0] = -1  # no order-0 pick
    data = make_data(h, {"j": picks}, extra={"stereotype": stereotype})
    table = position.generator_table(data, "j", Resampling(1000, 4)).set_index("source_model")
    assert table.columns.tolist() == position.GENERATOR_COLUMNS[:1] + position.GENERATOR_COLUMNS[2:]
    st = np.where(data.mask, stereotype, np.nan)
    first = picks[:, 0]
    rows = np.nonzero(first >= 0)[0]
    diff = st[rows, first[rows]] - np.nanmean(st[rows], axis=1)
    models = data.source_models[rows, first[rows]]
    assert table["count_order0"].sum() == n - 1
    assert table["contribution"].sum() == pytest.approx(diff.mean(), abs=1e-12)
    for model, row in table.iterrows():
        own = diff[models == model]
        assert row["count_order0"] == len(own) and row["share_order0"] == pytest.approx(len(own) / (n - 1))
        assert row["stereotype_mean"] == pytest.approx(np.nanmean(st[data.source_models == model]))
        if len(own):
            assert row["stereotype_delta"] == pytest.approx(own.mean())
            assert row["contribution"] == pytest.approx(own.sum() / len(diff))
            assert (row["stereotype_delta_lo"], row["stereotype_delta_hi"]) == pytest.approx(
                direct_interval(own, 1000, 4), abs=1e-12)
        else:
            assert np.isnan(row["stereotype_delta"]) and np.isnan(row["stereotype_delta_lo"])
    assert table.loc["imagegen3", "count_order0"] == 0  # picks never reach the fourth column


def test_generator_table_without_stereotype_ratings() -> None:
    data = make_data(np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.6]]), {"j": np.array([[0, 1], [2, 2]])})
    table = position.generator_table(data, "j", Resampling(100))
    assert table["share_order0"].tolist() == [0.5, 0.0, 0.5]
    assert table[["stereotype_mean", "stereotype_delta", "contribution"]].isna().all().all()


# ------------------------------------------------------------ the published JudgeActs main split
# (the `judgeacts` fixture: tests/audit_core/selection/conftest.py)

def in_file_order(data: SelectionData) -> SelectionData:
    """The same dataset with prompts in the order of main.jsonl, the order the study resamples."""
    lines = (JUDGEACTS / "data/derived/main.jsonl").read_text(encoding="utf-8").splitlines()
    order = [json.loads(line)["prompt_id"] for line in lines if line.strip()]
    rows = pd.Series(np.arange(data.n_prompts), index=data.prompts["prompt_id"]).loc[order].to_numpy()
    return dataclasses.replace(
        data, prompts=data.prompts.iloc[rows].reset_index(drop=True), candidate_ids=data.candidate_ids[rows],
        source_models=data.source_models[rows], mask=data.mask[rows],
        outcomes={k: v[rows] for k, v in data.outcomes.items()}, picks={k: v[rows] for k, v in data.picks.items()},
        slots={k: v[rows] for k, v in data.slots.items()}, statuses={k: v[rows] for k, v in data.statuses.items()},
        scores={k: v[rows] for k, v in data.scores.items()},
    )


def pct(x: float) -> float:
    return round(100 * x, 1)


# appendix_extras_difficulty.tex: stratum, range, n, flip %, 95% CI (%)
PUBLISHED_RANGE = {"low": ("0.00", "0.33", 148, 62.8, 54.7, 70.3), "mid": ("0.38", "0.50", 83, 59.0, 48.2, 69.9),
                   "high": ("0.58", "1.00", 69, 53.6, 42.0, 65.2)}
PUBLISHED_NEAR_TIES = {1: (177, 55.9, 48.6, 63.3), 2: (87, 65.5, 55.2, 74.7), 3: (32, 59.4, 43.8, 75.0),
                       4: (4, 100.0, 100.0, 100.0)}


def test_published_flip_tables(judgeacts) -> None:
    data, _ = judgeacts
    table = position.flip_by_range(in_file_order(data), "qwen", Resampling(seed=STUDY_SEED)).set_index("tertile")
    for name, (lo, hi, n, rate, rate_lo, rate_hi) in PUBLISHED_RANGE.items():
        row = table.loc[name]
        assert (f"{row['range_lo']:.2f}", f"{row['range_hi']:.2f}") == (lo, hi)
        assert row["prompts"] == row["parsed"] == n
        assert (pct(row["flip_rate"]), pct(row["flip_rate_lo"]), pct(row["flip_rate_hi"])) == (rate, rate_lo, rate_hi)
    ties = position.flip_by_near_ties(in_file_order(data), "qwen", Resampling(seed=STUDY_SEED)).set_index("near_ties")
    assert ties.index.tolist() == [1, 2, 3, 4]
    for k, (n, rate, rate_lo, rate_hi) in PUBLISHED_NEAR_TIES.items():
        row = ties.loc[k]
        assert row["parsed"] == n
        assert (pct(row["flip_rate"]), pct(row["flip_rate_lo"]), pct(row["flip_rate_hi"])) == (rate, rate_lo, rate_hi)
    # the groups and their rates do not depend on the prompt order; only the draws do
    sorted_order = position.flip_by_range(data, "qwen", Resampling(seed=STUDY_SEED))
    assert sorted_order["flip_rate"].tolist() == pytest.approx(table["flip_rate"].tolist())


# appendix_extras_stereo_generator.tex: uniform %, Qwen order-0 %, stereotype of its images,
# Δ stereotype when chosen [95% CI], contribution (review_extras.json for the unrounded value)
PUBLISHED_STEREOTYPE = {
    "Flux.1-Dev": (27.3, 3.3, 10, 0.074, -0.089, -0.164, -0.028, -0.002963),
    "GPT-Image": (27.2, 41.0, 123, 0.114, 0.006, -0.022, 0.035, 0.002634),
    "Imagen3": (17.9, 14.3, 43, 0.146, 0.042, -0.021, 0.111, 0.006088),
    "SD-3.5-Large": (27.6, 41.3, 124, 0.165, 0.042, 0.009, 0.077, 0.0175),
}


def test_published_stereotype_decomposition(judgeacts) -> None:
    data, _ = judgeacts
    table = position.generator_table(in_file_order(data), "qwen", Resampling(seed=STUDY_SEED)).set_index("source_model")
    for model, (uniform, share, n, mean, delta, lo, hi, contribution) in PUBLISHED_STEREOTYPE.items():
        row = table.loc[model]
        assert (pct(row["uniform"]), pct(row["share_order0"]), row["count_order0"]) == (uniform, share, n)
        assert [round(row[c], 3) for c in ("stereotype_mean", "stereotype_delta", "stereotype_delta_lo",
                                           "stereotype_delta_hi")] == [mean, delta, lo, hi]
        # the re-typed split rounds stereotype rates to 4 decimals: SD-3.5's 0.0175 comes out
        # as 0.017499…, so contributions are compared to 5 decimals, not printed to 3
        assert row["contribution"] == pytest.approx(contribution, abs=5e-6)
    assert round(table["contribution"].sum(), 3) == 0.023  # the judge's order-0 stereotype difference


# appendix_extras_gen_slot.tex / review_extras.json generator_by_slot_choice_rate: (shown, chosen)
PUBLISHED_SLOTS = {
    "Flux.1-Dev": {"A": (296, 65), "B": (296, 9), "C": (158, 2), "D": (138, 0), "all": (888, 76)},
    "GPT-Image": {"A": (233, 202), "B": (295, 181), "C": (295, 121), "D": (62, 17), "all": (885, 521)},
    "Imagen3": {"A": (73, 48), "B": (149, 23), "C": (211, 35), "D": (200, 39), "all": (633, 145)},
    "SD-3.5-Large": {"A": (298, 124), "B": (160, 11), "C": (236, 16), "D": (200, 7), "all": (894, 158)},
}
PUBLISHED_SLOT_RATES = {  # printed %
    "Flux.1-Dev": [22.0, 3.0, 1.3, 0.0, 8.6], "GPT-Image": [86.7, 61.4, 41.0, 27.4, 58.9],
    "Imagen3": [65.8, 15.4, 16.6, 19.5, 22.9], "SD-3.5-Large": [41.6, 6.9, 6.8, 3.5, 17.7],
}


def test_published_generator_by_slot_table(judgeacts) -> None:
    data, calls = judgeacts
    table = position.generator_slot_table(data, "qwen", ordered_calls(data, calls)["qwen"]).set_index(
        ["generator", "slot"])
    for generator, cells in PUBLISHED_SLOTS.items():
        for slot, (shown, chosen) in cells.items():
            assert table.loc[(generator, slot), ["presented", "chosen"]].tolist() == [shown, chosen]
        rates = [pct(table.loc[(generator, slot), "rate"]) for slot in ("A", "B", "C", "D", "all")]
        assert rates == PUBLISHED_SLOT_RATES[generator]
