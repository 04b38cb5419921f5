"""The audit's slices of a study held in partitions (`audit_core.selection.slice_summaries`): the cut points
found by `order_statistics` over the partitions, the partitions' summaries added in order, the layout made
of the sum and each partition's codes give exactly `slices.partitions` of the whole study (names, values,
notes, codes), on the demo store, a generated store, hand-made studies (missing countries, a `by` column
with None, no votes, prompts without ratings, a range without a middle tertile) and random labels; the
study split into 1, 3 and 7 uneven partitions (one of a single prompt) with `SelectionData.rows`."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core.errors import InputError
from audit_core.selection import metrics, position, slices
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.selection.slice_summaries import (
    SliceSummary,
    cut_points,
    disagreement_values,
    partition_codes,
    range_values,
    slice_layout,
    slice_summary,
)
from audit_core.stats import order_statistics
from benchmarks.synthetic import build_synthetic_db
from runners.demo import build_demo
from tests.support.selection_data import make_data

BY = ("split", "country", "split")  # a built-in name adds nothing, a repeated one once


def cut(n: int, parts: int) -> list[slice]:
    """`parts` contiguous slices of range(n): the first of a single prompt when parts > 1, the others growing."""
    if parts == 1:
        return [slice(0, n)]
    edges = [0, 1, *(1 + round((n - 1) * (i / (parts - 1)) ** 1.5) for i in range(1, parts))]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def partitioned(data: SelectionData, ranges: Sequence[slice], by: Sequence[str]):
    """(slices, notes) of `data` held in the partitions `ranges` as a driver makes them: cut points from
    CountPasses over the partitions, summaries summed in partition order, the layout, then each partition's
    codes concatenated. Also returns the summed summary and the cut points."""
    parts = [data.rows(rows) for rows in ranges]
    median, cuts = cut_points(order_statistics.local_pass([disagreement_values(p) for p in parts]),
                              order_statistics.local_pass([range_values(p) for p in parts]))
    summary = sum(slice_summary(p, by, median, cuts) for p in parts)
    values, notes = slice_layout(summary, by)
    codes = [partition_codes(p, values, median, cuts) for p in parts]
    whole = [slices.Partition(v.name, v.values, np.concatenate([c[k].codes for c in codes]))
             for k, v in enumerate(values)]
    for part_codes in codes:  # every partition's slices carry the global values
        assert [(p.name, p.values) for p in part_codes] == [(v.name, v.values) for v in values]
    return whole, notes, summary, (median, cuts)


def assert_same_slices(data: SelectionData, ranges: Sequence[slice], by: Sequence[str]) -> SliceSummary:
    expected, expected_notes = slices.partitions(data, by)
    got, notes, summary, (median, cuts) = partitioned(data, ranges, by)
    assert notes == expected_notes
    assert [(p.name, p.values) for p in got] == [(p.name, p.values) for p in expected]
    for mine, theirs in zip(got, expected):
        assert mine.codes.dtype == theirs.codes.dtype and np.array_equal(mine.codes, theirs.codes), mine.name
    # the cut points are numpy's, to the bit
    disagreement, spread = slices.prompt_disagreement(data), metrics.value_range(data.utility)
    assert np.array_equal([median], [slices.consensus_median(disagreement)], equal_nan=True)
    assert np.array_equal(cuts, position.range_cuts(spread), equal_nan=True)
    return summary


def load(db: Path, dataset: str) -> SelectionData:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return load_selection_data(con, dataset)
    finally:
        con.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> SelectionData:
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo(db, n_prompts=80, progress=False)  # the demo's generator, judges and votes, fewer prompts
    return load(db, "demo")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> SelectionData:
    db = tmp_path_factory.mktemp("syn") / "syn.duckdb"
    build_synthetic_db(db, n_prompts=200, seed=3, dataset_id="syn")  # no votes: the consensus slice is left out
    return load(db, "syn")


def hand_made(votes: bool = False) -> SelectionData:
    """Twelve prompts of 2–3 candidates: countries missing for prompts 1 and 7, a `split` column None for 4
    and 10, prompts 2 and 9 without ratings, votes (when `votes`) for all but prompts 0 and 5."""
    h = np.array([[0.5, 1.0, 0.0], [0.2, 0.2, np.nan], [0.0, 0.0, 0.0], [0.1, 0.9, 0.4], [1.0, 0.0, np.nan],
                  [0.3, 0.3, 0.3], [0.6, 0.2, 0.1], [0.0, 1.0, np.nan], [0.4, 0.4, 0.9], [0.0, 0.0, 0.0],
                  [0.7, 0.5, 0.5], [0.2, 0.8, np.nan]])
    countries = ["b", None, "a", "c", "a", "b", "c", None, "b", "a", "c", "a"]
    data = make_data(h, {"j": np.zeros((12, 1), dtype=np.int64)}, countries=countries)
    unrated = h.copy()
    unrated[[2, 9]] = np.nan  # the prompts keep their candidates, without an alignment rating
    split = ["dev", "main", "dev", "main", None, "dev", "main", "main", "dev", "main", None, "dev"]
    variance = None
    if votes:
        variance = np.where(data.mask, np.tile([0.25, 0.0, 1 / 9], (12, 1)) * (np.arange(12) % 4)[:, None], np.nan)
        variance[[0, 5]] = np.nan
    return dataclasses.replace(data, outcomes={**data.outcomes, "alignment": unrated}, vote_variance=variance,
                               prompts=data.prompts.assign(split=split))


@pytest.mark.parametrize("parts", [1, 3, 7])
def test_the_demo_store(demo: SelectionData, parts: int) -> None:
    summary = assert_same_slices(demo, cut(demo.n_prompts, parts), BY)
    assert summary.has_disagreement


@pytest.mark.parametrize("parts", [1, 3, 7])
def test_a_generated_store(synthetic: SelectionData, parts: int) -> None:
    summary = assert_same_slices(synthetic, cut(synthetic.n_prompts, parts), BY)
    assert not summary.has_disagreement
    # a column of a distinct label per prompt is a slice too (its summary grows with the distinct values)
    assert_same_slices(synthetic, cut(synthetic.n_prompts, parts), ["prompt_id"])


@pytest.mark.parametrize("votes", [False, True])
@pytest.mark.parametrize("parts", [1, 3, 7])
def test_a_hand_made_study_with_missing_values(parts: int, votes: bool) -> None:
    data = hand_made(votes)
    expected, notes = slices.partitions(data, ["split"])
    values = {p.name: p.values for p in expected}
    assert values["country"] == ["a", "b", "c", slices.NONE] and values["split"] == ["dev", "main", slices.NONE]
    assert values["range"][-1] == slices.NONE and values["best"][-1] == slices.NONE
    assert values["pool_size"] == ["2", "3"]
    assert ("consensus" in values) == votes and (notes == [slices.CONSENSUS_LEFT_OUT]) == (not votes)
    if votes:
        assert values["consensus"] == ["high", "low", slices.NONE]
    assert_same_slices(data, cut(data.n_prompts, parts), ["split"])


def test_pool_sizes_sort_as_numbers() -> None:
    h = np.full((4, 11), np.nan)
    for row, m in enumerate([10, 3, 11, 2]):
        h[row, :m] = np.linspace(0, 1, m)
    data = dataclasses.replace(make_data(np.zeros((4, 2))), mask=~np.isnan(h), outcomes={"alignment": h})
    got, _, summary, _ = partitioned(data, cut(4, 3), ())
    assert summary.labels["pool_size"] == (10, 3, 11, 2)  # as the partitions saw them, first seen first
    assert got[3].values == ["2", "3", "10", "11"] == slices.partitions(data)[0][3].values


def test_a_range_without_its_middle_tertile() -> None:
    """Ranges 0, 0, 1 are cut at q1 = 0 and q2 = 1/3: no prompt is "mid". Which tertiles a study has
    depends on its cut points, hence the summaries are made with them."""
    data = make_data(np.array([[0.5, 0.5], [0.2, 0.2], [0.0, 1.0]]))
    assert_same_slices(data, cut(3, 3), ())
    got, _, _, (_, cuts) = partitioned(data, cut(3, 3), ())
    assert list(cuts) == pytest.approx([0.0, 1 / 3]) and got[-1].values == ["low", "high"]


def test_the_summary_is_small_and_adds_up_in_order(demo: SelectionData) -> None:
    ranges = cut(demo.n_prompts, 7)
    median, cuts = slices.consensus_median(disagreement_values(demo)), position.range_cuts(range_values(demo))
    summaries = [slice_summary(demo.rows(rows), BY, median, cuts) for rows in ranges]
    whole = slice_summary(demo, BY, median, cuts)
    total = sum(summaries)
    assert dict(total.labels) == dict(whole.labels) and dict(total.missing) == dict(whole.missing)
    assert 0 + summaries[0] is summaries[0]
    for name, seen in whole.labels.items():  # one entry per distinct label, whatever the prompts
        assert len(seen) == len(set(seen)) <= demo.n_prompts
    assert len(whole.labels["pool_size"]) == 2 and len(whole.labels["all"]) == 1
    assert pickle.loads(pickle.dumps(total)).labels == total.labels  # it travels to the driver


def test_an_unknown_by_column_is_refused_at_every_step() -> None:
    data = hand_made(votes=True)
    median, cuts = slices.consensus_median(disagreement_values(data)), position.range_cuts(range_values(data))
    summary = slice_summary(data, ["split"], median, cuts)
    for step in (lambda: slices.partitions(data, ["colour"]), lambda: slice_layout(summary, ["split", "colour"]),
                 lambda: slice_summary(data, ["colour"], median, cuts),
                 lambda: slices.check_slice_columns(data.prompts.columns, ["colour"]),
                 lambda: slices.check_slice_columns(data.prompts.columns, ["m"])):
        with pytest.raises(InputError, match="is not a prompt attribute"):
            step()
    with pytest.raises(ValueError, match="make the partitions' summaries with by=\\['prompt'\\]"):
        slice_layout(summary, ["prompt"])  # a prompt attribute the summaries were not made for
    with pytest.raises(ValueError, match="cannot add slice summaries"):
        summary + slice_summary(data, [], median, cuts)


def test_codes_into_given_values_refuse_a_label_outside_them() -> None:
    values = slices.SliceValues("x", ("a", "b"), False)
    assert slices.partition("x", ["b", "a", "b"], values=values).codes.tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="label 'c' is not among its values"):
        slices.partition("x", ["a", "c"], values=values)
    with pytest.raises(ValueError, match="not among its values"):
        slices.partition("x", ["a", None], values=values)  # a missing label, and the values have no "(none)"
    assert slices.partition("x", ["a", None], values=dataclasses.replace(values, missing=True)).codes.tolist() == [0, 2]


def test_labels_from_given_cut_points_are_the_whole_studys() -> None:
    h = np.array([[1.0, 0.5, 0.5], [1.0, 1.0, 0.0], [0.2, 0.2, np.nan], [0.0, 0.5, 0.9], [np.nan, np.nan, np.nan]])
    spread = metrics.value_range(h)
    assert slices.range_labels(h).tolist() == slices.range_labels(h, position.range_cuts(spread)).tolist()
    assert slices.range_labels(h, (0.0, 0.5)).tolist() == ["mid", "high", "low", "high", None]
    assert position.tertile_labels(spread, 0.5, 0.9).tolist() == ["low", "high", "low", "mid", ""]
    disagreement = np.array([0.1, np.nan, 0.3, 0.2])
    assert slices.consensus_labels(disagreement).tolist() == slices.consensus_labels(disagreement, 0.2).tolist()
    assert slices.consensus_labels(disagreement, 0.15).tolist() == ["high", None, "low", "low"]


LABELS = {
    "ints": st.one_of(st.none(), st.integers(-3, 12)),
    "strings": st.one_of(st.none(), st.sampled_from(["", "a", "B", "b", "ä", "10", "9", "(none)"])),
}


@st.composite
def studies(draw) -> tuple[SelectionData, list[slice]]:
    """A study of 1–30 prompts with a random `label` column (ints or strings, some None), random countries
    (some None), ratings on a coarse grid (some prompts unrated), votes or none, split at random points
    (partitions may be empty)."""
    n = draw(st.integers(1, 30))
    kind = draw(st.sampled_from(sorted(LABELS)))
    labels = draw(st.lists(LABELS[kind], min_size=n, max_size=n))
    countries = draw(st.lists(st.one_of(st.none(), st.sampled_from(["x", "y", "z"])), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    h = np.round(rng.random((n, 3)) * draw(st.sampled_from([1, 2, 6]))) / 6
    h[rng.random(n) < 0.2, 2] = np.nan
    data = make_data(h)
    unrated = np.where(rng.random(n)[:, None] < 0.15, np.nan, h)
    variance = None
    if draw(st.booleans()):
        variance = np.where(data.mask & (rng.random((n, 3)) < 0.6), rng.choice([0.0, 1 / 16, 1 / 9, 0.25], (n, 3)),
                            np.nan)
    data = dataclasses.replace(data, outcomes={"alignment": unrated}, vote_variance=variance,
                               prompts=data.prompts.assign(label=labels, country=countries))
    points = draw(st.lists(st.integers(0, n), max_size=6))
    edges = [0, *sorted(points), n]
    return data, [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


@settings(max_examples=150, deadline=None)
@given(studies())
def test_random_labels_split_at_random_points(study) -> None:
    data, ranges = study
    assert_same_slices(data, ranges, ["label"])
