"""audit_core.selection.browse: explorer filtering, paging, marks and one pool's detail frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_core import store
from audit_core.selection import browse
from audit_core.selection.outcomes import prompt_outcomes
from audit_core.selection.policies import policy_picks
from tests.support.app import FAILED, HTML_PROMPT, build_app_db, load_tiny, pick_rule
from tests.support.selection_data import random_data


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("browse")
    return str(build_app_db(tmp / "b.duckdb", tmp / "images"))


@pytest.fixture(scope="module")
def data(db):
    return load_tiny(db)


def test_filter_narrows_and_keeps_prompt_rows(data):
    outcomes = prompt_outcomes(data, "alpha")
    everything = browse.filter_pools(data, outcomes, browse.PoolFilter())
    assert len(everything) == 12
    japan = browse.filter_pools(data, outcomes, browse.PoolFilter(countries=("Japan",)))
    assert set(japan["country"]) == {"Japan"} and 0 < len(japan) < 12
    assert (data.prompts.loc[japan.index, "prompt_id"] == japan["prompt_id"]).all()
    both = browse.filter_pools(data, outcomes, browse.PoolFilter(countries=("Japan",), outcomes=("below_mean",)))
    assert set(both.index) <= set(japan.index)


def test_generator_filter_needs_that_generator_in_the_pool(data):
    outcomes = prompt_outcomes(data, "alpha")
    four = browse.filter_pools(data, outcomes, browse.PoolFilter(generators=("imagegen3",)))
    assert (four["m"] == 4).all() and len(four) == 6  # only the 4-image pools carry imagegen3


def test_text_search_is_literal_and_case_insensitive(data):
    outcomes = prompt_outcomes(data, "alpha")
    hit = browse.filter_pools(data, outcomes, browse.PoolFilter(text="<SCRIPT>alert(1)"))
    assert list(hit["prompt"]) == [HTML_PROMPT]
    assert browse.filter_pools(data, outcomes, browse.PoolFilter(text="(")).shape[0] == 1  # not a regex


def test_outcome_filters_treat_unknown_as_not_matching(data):
    outcomes = prompt_outcomes(data, "alpha")
    flips = browse.filter_pools(data, outcomes, browse.PoolFilter(outcomes=("flip",)))
    steady = browse.filter_pools(data, outcomes, browse.PoolFilter(outcomes=("unanimous",)))
    failed = browse.filter_pools(data, outcomes, browse.PoolFilter(outcomes=("parse_fail",)))
    assert list(failed["prompt_id"]) == [FAILED[0]]
    assert len(flips) + len(steady) + len(failed) == 12  # the failed prompt is neither flip nor unanimous
    with pytest.raises(KeyError, match="unknown outcome filter"):
        browse.filter_pools(data, outcomes, browse.PoolFilter(outcomes=("nope",)))


def test_sort_puts_missing_last_and_breaks_ties_by_prompt_id():
    frame = pd.DataFrame({"prompt_id": ["c", "a", "b", "d"], "regret": [0.5, np.nan, 0.5, 1.0],
                          "country": "x", "category": "y", "prompt": "z"})
    empty = np.zeros((4, 2), dtype=object)

    class Data:
        source_models = empty

    up = browse.filter_pools(Data, frame, browse.PoolFilter(sort="regret", descending=False))
    assert list(up["prompt_id"]) == ["b", "c", "d", "a"]
    down = browse.filter_pools(Data, frame, browse.PoolFilter(sort="regret", descending=True))
    assert list(down["prompt_id"]) == ["d", "b", "c", "a"]


def test_page_bounds_clamp_and_never_return_zero_pages():
    assert browse.page_bounds(25, 1, 10) == (0, 10, 3)
    assert browse.page_bounds(25, 3, 10) == (20, 25, 3)
    assert browse.page_bounds(25, 9, 10) == (20, 25, 3)
    assert browse.page_bounds(0, 1, 10) == (0, 0, 1)


def test_neighbours_at_the_ends_and_outside():
    ids = ["a", "b", "c"]
    assert browse.neighbours(ids, "a") == (None, "b")
    assert browse.neighbours(ids, "b") == ("a", "c")
    assert browse.neighbours(ids, "c") == ("b", None)
    assert browse.neighbours(ids, "z") == (None, None)


def test_judge_marks_are_short_and_unique():
    assert browse.judge_marks(["qwen", "qwen8b", "smol"]) == {"qwen": "Q", "qwen8b": "Q8", "smol": "S"}
    marks = browse.judge_marks(["slot-a-judge", "strong-judge", "weak-judge"])
    assert marks == {"slot-a-judge": "SL", "strong-judge": "ST", "weak-judge": "W"}
    assert browse.judge_marks(["a", "ab"]) == {"a": "A", "ab": "AB"}
    assert browse.judge_marks(["<b>odd</b>", "x"]) == {"<b>odd</b>": "B", "x": "X"}


def test_prompt_row_names_the_dataset_when_absent(data):
    assert browse.prompt_row(data, "p003") == 3
    with pytest.raises(KeyError, match="'nope' is not in dataset 'tiny'"):
        browse.prompt_row(data, "nope")


def test_pool_tiles_mark_order0_picks_and_best(data):
    tiles = browse.pool_tiles(data, [3], data.judges, {})
    assert list(tiles["canonical_index"]) == [0, 1, 2, 3]
    for j, judge in enumerate(data.judges):
        picked = tiles[tiles["picked_by"].map(lambda by, judge=judge: judge in by)]
        assert list(picked["canonical_index"]) == [pick_rule(3, j, 0, 4)]
    assert tiles.loc[tiles["best"], "alignment"].eq(tiles["alignment"].max()).all()
    assert tiles["image_path"].isna().all()  # no path given: the page draws a placeholder


def test_pool_grid_rows_are_orders_and_picks_follow_the_calls(db):
    con = store.connect(db, read_only=True)
    calls = browse.load_pool_calls(con, "tiny", "p003")
    con.close()
    grid = browse.pool_grid(calls)
    assert sorted(grid["order_index"].unique()) == [0, 1, 2]
    assert grid.groupby("arrangement").size().tolist() == [4, 4, 4]
    ids = sorted(calls["slot_candidate_ids"].iloc[0])
    for k in range(3):
        row = grid[grid["order_index"] == k]
        assert list(row["candidate_id"]) == ids[k:] + ids[:k]  # rotation k
        chosen = row[row["picked_by"].map(lambda by: "alpha" in by)]
        assert list(chosen["candidate_id"]) == [ids[pick_rule(3, 0, k, 4)]]
    assert browse.pool_grid(calls.iloc[0:0]).empty


def test_choices_by_order_show_failures_by_status(db):
    con = store.connect(db, read_only=True)
    calls = browse.load_pool_calls(con, "tiny", FAILED[0])
    con.close()
    table = browse.choices_by_order(calls)
    assert table.loc["alpha", f"order {FAILED[1]}"] == "parse_fail"
    assert table.loc["beta", "order 0"].startswith(("A → ", "B → ", "C → ", "D → "))


def test_candidate_table_lists_votes_and_scores(db, data):
    con = store.connect(db, read_only=True)
    row = browse.prompt_row(data, "p002")
    votes = store.load_votes(con, "tiny", list(data.candidate_ids[row, :3]))
    con.close()
    table = browse.candidate_table(data, row, votes)
    assert {"alignment", "stereotype", "overall", "alignment_votes", "score: scorer"} <= set(table.columns)
    assert all(v.count(",") == 2 for v in table["alignment_votes"])  # three annotators each
    no_votes = browse.candidate_table(data, row, votes.iloc[0:0])
    assert (no_votes["alignment_votes"] == "").all()


def test_gate_decisions_follow_policy_picks(data):
    picks = policy_picks(data)
    row = browse.prompt_row(data, "p003")
    table = browse.gate_decisions(data, picks, row).set_index("policy")
    assert set(table.index) == set(picks)
    for policy, chosen in picks.items():
        assert bool(table.loc[policy, "acts"]) == (chosen[row] >= 0)
    assert table.loc["alpha agree>=3/3", "candidate_id"] == ""


def test_a_pools_outcomes_are_its_rows_of_every_judges_whole_outcomes():
    """`pool_outcomes`, computed on one pool alone, equals each judge's prompt_outcomes row of that pool on
    the whole study, for every pool (failed picks, 3- and 4-image pools); and `SelectionData.rows` holds
    exactly those prompts' rows of every array."""
    study = random_data(60, judges=("a", "b", "c"))
    whole = {judge: prompt_outcomes(study, judge) for judge in study.judges}
    for row in range(study.n_prompts):
        table = browse.pool_outcomes(study, study.judges, row)
        expected = pd.DataFrame.from_dict({j: frame.iloc[row] for j, frame in whole.items()}, orient="index")
        pd.testing.assert_frame_equal(table, expected[table.columns])
    part = study.rows(slice(7, 19))
    assert part.prompts["prompt_id"].tolist() == study.prompts["prompt_id"].iloc[7:19].tolist()
    assert part.prompts.index.tolist() == list(range(12))
    for name in ("candidate_ids", "source_models", "mask"):
        assert (getattr(part, name) == getattr(study, name)[7:19]).all(), name
    for name in ("outcomes", "picks", "slots", "statuses", "scores"):
        whole_arrays, arrays = getattr(study, name), getattr(part, name)
        assert arrays.keys() == whole_arrays.keys(), name
        for k, values in arrays.items():
            assert np.array_equal(values, whole_arrays[k][7:19], equal_nan=values.dtype.kind == "f"), (name, k)
