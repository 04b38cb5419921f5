"""The audit's judge tables and composition table of a study held in partitions
(`audit_core.selection.judge_summaries`): each partition's summary, added in partition order, gives the whole
study's `audit._judge_tables` and `composition_table`, on generated studies of 300 prompts (every fixed-n
group at most `bootstrap.EXACT_DRAWS_UP_TO` values: drawn by index, in prompt order) and of 5,000 (groups on
both sides of it: drawn from their multiset) with recovered, parse- and runtime-failed and missing calls,
unrated stereotypes and a rare generator, and on the published JudgeActs main split; split into 1, 3 and 7
partitions (uneven, one of a single prompt) with `SelectionData.rows`, under 200 resamples.

Exact: every count, share of counts, range bound and interval. The float sums are added in another order
than the whole study's (pairwise) sums: the FLOAT_SUMS columns equal the whole study's within SUM_RTOL, and
exactly when the study is one partition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, store
from audit_core.selection import metrics, position
from audit_core.selection.audit import _judge_tables
from audit_core.selection.composition import composition_table
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.selection.judge_summaries import (
    CompositionSummary,
    FixedNValues,
    JudgeTablesSummary,
    composition_from_summary,
    composition_summary,
    judge_tables_from_summary,
    judge_tables_summary,
    range_cuts,
)
from audit_core.stats import bootstrap
from audit_core.stats.order_statistics import local_pass
from benchmarks.synthetic import build_synthetic_db
from tests.audit_core.selection.test_call_summaries import cut
from tests.support.debiased import stored_calls

SUM_RTOL = 1e-12  # float sums of the same values added in another order
RESAMPLING = Resampling(200)
TABLES = ("judges", "positions", "generators", "flips_by_range", "flips_by_near_ties")
FLOAT_SUMS = {
    "judges": ["first_slot_uniform", "chi2", "chi2_p", "entropy"],
    "positions": ["uniform"],
    "generators": ["uniform", "stereotype_mean", "stereotype_delta", "contribution"],
    "flips_by_range": [],
    "flips_by_near_ties": [],
    "composition": ["alignment_mean", "stereotype_mean", "range_mean"],
}
RARE = "rare-gen"  # a generator of two prompts only: most partitions never see it


def generated(db: Path, n_prompts: int) -> SelectionData:
    """A generated study of three judges in three orders with recovered, runtime-failed and missing calls,
    parse failures (the generator's), unrated stereotypes and a rare generator."""
    dataset = build_synthetic_db(db, n_prompts=n_prompts, n_judges=3, n_orders=3, seed=7, dataset_id="syn")
    picked = "(hash(run_id || prompt_id || order_index::VARCHAR) % {}) = {}"
    con = store.connect(db)
    try:
        con.execute(f"UPDATE calls SET status = 'recovered' WHERE status = 'ok' AND {picked.format(11, 0)}")
        con.execute(f"""UPDATE calls SET status = 'runtime_fail', choice_label = NULL, chosen_candidate_id = NULL
                        WHERE {picked.format(13, 1)}""")
        con.execute(f"DELETE FROM calls WHERE {picked.format(17, 3)}")
        con.execute("DELETE FROM ratings WHERE outcome = 'stereotype' AND hash(candidate_id) % 9 = 0")
        con.execute("""UPDATE candidates SET source_model = ? WHERE canonical_index = 0 AND prompt_id IN
                       (SELECT prompt_id FROM prompts ORDER BY prompt_id LIMIT 2 OFFSET 100)""", [RARE])
    finally:
        con.close()
    return stored_calls(db, dataset)[0]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> SelectionData:
    return generated(tmp_path_factory.mktemp("judge_summaries") / "small.duckdb", 300)


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> SelectionData:
    return generated(tmp_path_factory.mktemp("judge_summaries") / "large.duckdb", 5_000)


def summed(data: SelectionData, parts: int) -> tuple[JudgeTablesSummary, CompositionSummary]:
    """The judge-table and composition summaries of `data` split into `parts` partitions, added in order;
    the range cut points from a CountPass over the partitions, as a driver finds them."""
    partitions = [data.rows(rows) for rows in cut(data.n_prompts, parts)]
    cuts = range_cuts(local_pass([metrics.value_range(part.utility) for part in partitions]))
    return (sum(judge_tables_summary(part, cuts) for part in partitions),
            sum(composition_summary(part) for part in partitions))


def assert_equal_tables(got: pd.DataFrame, whole: pd.DataFrame, float_sums: list[str], exact: bool) -> None:
    """got equals whole: exactly, or (not `exact`) the float_sums columns within SUM_RTOL and the rest exactly."""
    if exact:
        pd.testing.assert_frame_equal(got, whole, check_exact=True)
        return
    rest = [c for c in whole.columns if c not in float_sums]
    pd.testing.assert_frame_equal(got[rest], whole[rest], check_exact=True)
    pd.testing.assert_frame_equal(got[float_sums], whole[float_sums], check_exact=False, rtol=SUM_RTOL, atol=0)


def assert_partitions_add_up(data: SelectionData) -> None:
    whole = _judge_tables(data, RESAMPLING)
    composition = composition_table(data)
    for parts in (1, 3, 7):
        judges, compositions = summed(data, parts)
        assert isinstance(judges, JudgeTablesSummary) and isinstance(compositions, CompositionSummary)
        for name, got, expected in zip(TABLES, judge_tables_from_summary(judges, RESAMPLING), whole):
            assert_equal_tables(got, expected, FLOAT_SUMS[name], exact=parts == 1)
        assert_equal_tables(composition_from_summary(compositions), composition, FLOAT_SUMS["composition"],
                            exact=parts == 1)


def group_sizes(data: SelectionData) -> list[int]:
    """The sizes of the judge tables' fixed-n groups (flips, first-slot prompts, generators' order-0 picks,
    tertiles, near-tie counts) over the whole study."""
    summary = summed(data, 1)[0]
    return [g.n for s in summary.judges.values()
            for g in (s.flips, s.first_slot, *s.own, *s.tertile_flips, *s.near_tie_flips)]


def test_the_generated_studies_have_what_the_summaries_must_add(small, large) -> None:
    for data in (small, large):
        statuses = np.concatenate([s.ravel() for s in data.statuses.values()])
        assert {"ok", "recovered", "parse_fail", "runtime_fail", ""} <= set(statuses)
        assert len(data.judges) == 3 and (data.source_models == RARE).sum() == 2
        assert np.isnan(data.outcomes["stereotype"][data.mask]).any()
    assert max(group_sizes(small)) <= bootstrap.EXACT_DRAWS_UP_TO
    own = [g.n for s in summed(large, 1)[0].judges.values() for g in s.own]  # stereotype differences
    for sizes in (group_sizes(large), own):
        assert any(n > bootstrap.EXACT_DRAWS_UP_TO for n in sizes)
        assert any(1 < n <= bootstrap.EXACT_DRAWS_UP_TO for n in sizes)


def test_the_partitions_of_a_small_study_add_up_to_its_tables(small) -> None:
    assert_partitions_add_up(small)


def test_the_partitions_of_a_large_study_add_up_to_its_tables(large) -> None:
    assert_partitions_add_up(large)


def test_the_summaries_are_bounded(large) -> None:
    """A group keeps its values in order up to EXACT_DRAWS_UP_TO only; flips have 2 distinct values, first-slot
    pairs at most (K + 1)², stereotype differences of ratings on thirds far fewer than the prompts."""
    judges, _ = summed(large, 3)
    for s in judges.judges.values():
        for group in (s.flips, s.first_slot, *s.own, *s.tertile_flips, *s.near_tie_flips):
            assert (group.ordered is None) == (group.n > bootstrap.EXACT_DRAWS_UP_TO)
            assert group.ordered is None or len(group.ordered) == group.n
            assert int(group.counts.sum()) == group.n
        assert len(s.flips.distinct) <= 2 and len(s.first_slot.distinct) <= (s.orders + 1) ** 2
        assert all(len(group.distinct) < 200 for group in s.own)


@pytest.mark.parametrize("draw", [
    lambda rng: rng.integers(-12, 13, size=2_500) / 12,  # on a lattice
    lambda rng: rng.choice(rng.normal(size=40), size=2_500),  # few distinct values off a lattice: multinomial
    lambda rng: np.round(rng.normal(size=2_500), 3),  # many distinct values off a small lattice: rounded
])
def test_a_group_above_the_exact_draws_is_drawn_from_its_multiset(draw) -> None:
    rng = np.random.default_rng(3)
    values = draw(rng)
    parts = [FixedNValues.of(values[a:b]) for a, b in ((0, 1), (1, 900), (900, 2_500))]
    group = sum(parts)
    assert group.ordered is None and group.n == len(values)
    expected = position.fixed_n_interval(values, RESAMPLING)
    assert group.interval(RESAMPLING) == expected == position.fixed_n_interval(rng.permutation(values), RESAMPLING)
    assert group.mean() == pytest.approx(values.mean(), rel=SUM_RTOL)
    below = parts[0] + parts[1]
    np.testing.assert_array_equal(below.ordered[:, 0], values[:900])
    assert below.interval(RESAMPLING) == position.fixed_n_interval(values[:900], RESAMPLING)


def test_values_that_keep_index_draws_cannot_be_made_from_a_summary() -> None:
    values = np.concatenate([np.zeros(1_500), [np.inf]])
    assert bootstrap.counted_means(*np.unique(values, return_counts=True), RESAMPLING) is None
    with pytest.raises(ValueError, match="prompt order"):
        FixedNValues.of(values).interval(RESAMPLING)


def test_a_partition_needs_the_whole_studys_range_cuts(small) -> None:
    with pytest.raises(ValueError, match="range_cuts"):
        judge_tables_summary(small.rows(slice(0, 10)), (np.nan, np.nan))


def test_range_tertiles_label_by_tertile_labels() -> None:
    spread = np.array([0.0, np.nan, 0.5, 0.25, 1.0, 0.25])
    labels = position.range_tertiles(spread)
    q1, q2 = np.quantile(spread[~np.isnan(spread)], [1 / 3, 2 / 3])
    np.testing.assert_array_equal(labels, position.tertile_labels(spread, q1, q2))
    assert list(labels) == ["low", "", "high", "low", "high", "low"]


def test_the_published_split_adds_up(judgeacts_db: Path) -> None:
    con = store.connect(judgeacts_db, read_only=True)
    try:
        data = load_selection_data(con, "main")
    finally:
        con.close()
    assert_partitions_add_up(data)
