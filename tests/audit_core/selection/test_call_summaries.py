"""Three call-derived tables of a study held in partitions (`audit_core.selection.call_summaries`): each
partition's summary, added in partition order, gives the whole study's generator-by-slot table, timing
table and policy costs, on a generated study with recovered, failed and missing calls, untimed calls and a
generator few prompts show, and on the published JudgeActs main split; the study split into 1, 3 and 7
partitions (uneven, one of a single prompt) with `SelectionData.rows` and `OrderedCalls.rows`.

Exact: every count, the generator-slot table, seconds_median (numpy's median, from the partitions' prefix
counts) and calls_per_prompt. Sums of seconds are added in another order than the whole study's
(pairwise) sums: seconds_mean, the prompt seconds, all_over_one, the hours and seconds_per_prompt equal the
whole study's within SUM_RTOL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, audit_selection, store
from audit_core.selection import position
from audit_core.selection.call_summaries import (
    GeneratorSlotSummary,
    PolicyCostSummary,
    TimingSummary,
    generator_slot_summary,
    generator_slot_table_from_summary,
    local_seconds_passes,
    policy_cost_summary,
    policy_costs_from_summary,
    timing_summary,
    timing_table_from_summary,
)
from audit_core.selection.costs import POLICY_COST_COLUMNS, policy_costs
from audit_core.selection.data import SelectionData
from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.debiased.names import prior_corrected_name
from audit_core.selection.timing import TEXT_COLUMNS, TIMING_COLUMNS, timing_table_from_arrays
from benchmarks.synthetic import build_synthetic_db
from tests.support.debiased import stored_calls

SUM_RTOL = 1e-12  # float sums of the same seconds added in another order
SUMMED = ["seconds_mean", "prompt_seconds_one_order", "prompt_seconds_all_orders", "all_over_one",
          "hours_one_order", "hours_all_orders"]
N_PROMPTS = 150
RARE = "rare-gen"  # a generator of two prompts only: most partitions never see it
NO_TEXT = pd.DataFrame(columns=list(TEXT_COLUMNS))


def cut(n: int, parts: int) -> list[slice]:
    """`parts` contiguous slices of range(n): the first of a single prompt when parts > 1, the others growing."""
    if parts == 1:
        return [slice(0, n)]
    edges = [0, 1, *(1 + round((n - 1) * (i / (parts - 1)) ** 1.5) for i in range(1, parts))]
    return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> tuple[SelectionData, dict[str, OrderedCalls], pd.DataFrame, pd.DataFrame]:
    """(data, judge -> calls, the calls that carry text, the audit's policies) of a generated study of four
    judges in three orders, with calls recovered, failed at runtime, missing and untimed, and a rare generator."""
    db = tmp_path_factory.mktemp("summaries") / "syn.duckdb"
    dataset = build_synthetic_db(db, n_prompts=N_PROMPTS, n_judges=4, n_orders=3, seed=11, dataset_id="syn")
    picked = "(hash(run_id || prompt_id || order_index::VARCHAR) % {}) = {}"
    con = store.connect(db)
    try:
        con.execute(f"""UPDATE calls SET status = 'recovered', raw_output = ' A', parse_note = 'bare label'
                        WHERE status = 'ok' AND {picked.format(11, 0)}""")
        con.execute(f"""UPDATE calls SET status = 'runtime_fail', raw_output = NULL, parse_note = 'TimeoutError',
                        choice_label = NULL, chosen_candidate_id = NULL WHERE {picked.format(13, 1)}""")
        con.execute(f"UPDATE calls SET seconds = NULL WHERE {picked.format(7, 2)}")
        con.execute(f"DELETE FROM calls WHERE {picked.format(17, 3)}")
        con.execute("""UPDATE candidates SET source_model = ? WHERE canonical_index = 0 AND prompt_id IN
                       (SELECT prompt_id FROM prompts ORDER BY prompt_id LIMIT 2 OFFSET 60)""", [RARE])
        texts = store.load_call_texts(con, dataset)
    finally:
        con.close()
    data, ordered = stored_calls(db, dataset)
    return data, ordered, texts, with_rare_kinds(audit_selection(data, Resampling(0), ordered=ordered,
                                                                call_texts=texts).policies, data.judges)


def with_rare_kinds(policies: pd.DataFrame, judges: list[str]) -> pd.DataFrame:
    """`policies` with each judge's prior-corrected policy (1 + (K − 1)·f calls: the study's calls carry no
    label probabilities, so the audit leaves it out) and a row of a kind without a cost rule."""
    extra = [{"policy": prior_corrected_name(j), "kind": "debiased", "base_judge": j, "partner": None} for j in judges]
    extra.append({"policy": "some composed gate", "kind": "composed_gate", "base_judge": judges[0], "partner": None})
    return pd.concat([policies, pd.DataFrame(extra)], ignore_index=True)


@pytest.fixture(scope="module")
def published(judgeacts_db: Path) -> tuple[SelectionData, dict[str, OrderedCalls], pd.DataFrame, pd.DataFrame]:
    """The same of the JudgeActs main split (skipped where its files are absent)."""
    data, ordered = stored_calls(judgeacts_db, "main")
    con = store.connect(judgeacts_db, read_only=True)
    try:
        texts = store.load_call_texts(con, "main")
    finally:
        con.close()
    return data, ordered, texts, with_rare_kinds(audit_selection(data, Resampling(0), ordered=ordered,
                                                                call_texts=texts).policies, data.judges)


def test_the_generated_study_has_what_the_summaries_must_add(study) -> None:
    data, ordered, _, policies = study
    statuses = np.concatenate([s.ravel() for s in data.statuses.values()])
    assert {"ok", "recovered", "parse_fail", "runtime_fail", ""} <= set(statuses)
    assert len(data.judges) == 4 and all(np.isnan(c.seconds).any() for c in ordered.values())
    assert (data.source_models == RARE).sum() == 2
    assert {"judge", "majority", "order", "debiased", "order_gate", "judge_gate", "scorer", "scorer_gate",
            "random", "oracle"} <= set(policies["kind"])


def test_cut_gives_uneven_partitions_one_of_a_single_prompt() -> None:
    for parts in (3, 7):
        sizes = [s.stop - s.start for s in cut(N_PROMPTS, parts)]
        assert len(sizes) == parts and sum(sizes) == N_PROMPTS and 1 in sizes and len(set(sizes)) > 2


def _generator_slots_add_up(data, ordered) -> None:
    for parts in (1, 3, 7):
        for judge in data.judges:
            whole = position.generator_slot_table(data, judge, ordered[judge])
            summaries = [generator_slot_summary(data.rows(rows), judge, ordered[judge].rows(rows))
                         for rows in cut(data.n_prompts, parts)]
            summed = sum(summaries)
            assert isinstance(summed, GeneratorSlotSummary)
            pd.testing.assert_frame_equal(generator_slot_table_from_summary(summed), whole, check_exact=True)


def _timing_adds_up(data, ordered, texts) -> None:
    seconds = {judge: ordered[judge].seconds for judge in data.judges}
    whole = timing_table_from_arrays(data.statuses, seconds, texts)
    for parts in (1, 3, 7):
        held = [({j: s[rows] for j, s in data.statuses.items()}, {j: s[rows] for j, s in seconds.items()})
                for rows in cut(data.n_prompts, parts)]
        # the calls with text carry no prompt here: all in the first partition, none in the others
        summed = sum(timing_summary(statuses, mine, texts if i == 0 else NO_TEXT)
                     for i, (statuses, mine) in enumerate(held))
        assert isinstance(summed, TimingSummary)
        table = timing_table_from_summary(summed, local_seconds_passes([mine for _, mine in held]))
        exact = [c for c in TIMING_COLUMNS if c not in SUMMED]
        pd.testing.assert_frame_equal(table[exact], whole[exact], check_exact=True)
        pd.testing.assert_frame_equal(table[SUMMED], whole[SUMMED], check_exact=False, rtol=SUM_RTOL, atol=0)
        if parts == 1:  # one partition's sums are the whole study's sums: every column to the bit
            pd.testing.assert_frame_equal(table, whole, check_exact=True)


def _costs_add_up(data, ordered, policies) -> None:
    whole = policy_costs(policies, data, ordered)
    for parts in (1, 3, 7):
        summed = sum(policy_cost_summary(policies, data.rows(rows), {j: c.rows(rows) for j, c in ordered.items()})
                     for rows in cut(data.n_prompts, parts))
        assert isinstance(summed, PolicyCostSummary) and len(summed.rows) == len(policies)
        table = policy_costs_from_summary(policies, summed)
        pd.testing.assert_frame_equal(table[["calls_per_prompt"]], whole[["calls_per_prompt"]], check_exact=True)
        pd.testing.assert_frame_equal(table, whole, check_exact=False, rtol=SUM_RTOL, atol=0)
        if parts == 1:
            pd.testing.assert_frame_equal(table, whole, check_exact=True)
    assert whole.columns.tolist() == POLICY_COST_COLUMNS and whole["seconds_per_prompt"].notna().any()
    corrected = policies["policy"].isin([prior_corrected_name(j) for j in data.judges]).to_numpy()
    assert corrected.any() and (whole.loc[corrected, "calls_per_prompt"] % 1 > 0).all()  # 1 + (K − 1)·f
    assert whole[(policies["kind"] == "composed_gate").to_numpy()].isna().all(axis=None)


def test_generator_slot_tables_of_partitions_equal_the_whole_studys(study) -> None:
    data, ordered, _, _ = study
    _generator_slots_add_up(data, ordered)
    one = generator_slot_summary(data.rows(slice(0, 1)), data.judges[0], ordered[data.judges[0]].rows(slice(0, 1)))
    assert RARE not in one.generators  # the single prompt's summary knows its own generators only


def test_timing_tables_of_partitions_equal_the_whole_studys(study) -> None:
    data, ordered, texts, _ = study
    _timing_adds_up(data, ordered, texts)


def test_policy_costs_of_partitions_equal_the_whole_studys(study) -> None:
    data, ordered, _, policies = study
    _costs_add_up(data, ordered, policies)


def test_published_tables_of_partitions_equal_the_whole_studys(published) -> None:
    data, ordered, texts, policies = published
    _generator_slots_add_up(data, ordered)
    _timing_adds_up(data, ordered, texts)
    _costs_add_up(data, ordered, policies)


def test_generator_slot_counts_add_by_generator_name_and_pad_a_narrower_partition() -> None:
    wide = GeneratorSlotSummary("j", ("a", "c"), np.array([[1, 2, 3], [4, 5, 6]]), np.array([[1, 0, 1], [0, 2, 3]]))
    narrow = GeneratorSlotSummary("j", ("b", "c"), np.array([[7, 8], [1, 1]]), np.array([[3, 3], [1, 0]]))
    summed = wide + narrow
    assert summed.generators == ("a", "b", "c")
    assert summed.presented.tolist() == [[1, 2, 3], [7, 8, 0], [5, 6, 6]]
    assert summed.chosen.tolist() == [[1, 0, 1], [3, 3, 0], [1, 2, 3]]
    with pytest.raises(ValueError, match="judge 'j'"):
        wide + GeneratorSlotSummary("k", (), np.zeros((0, 3), np.int64), np.zeros((0, 3), np.int64))


def test_timing_of_a_partition_loaded_with_fewer_orders_times_none_of_its_prompts() -> None:
    """A partition whose calls stop at order 1 of a judge's 3: its prompts lack orders 2 in the whole study."""
    status = np.array([["ok", "ok", "ok"], ["ok", "recovered", ""]], dtype=object)
    seconds = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, np.nan]])
    whole = timing_table_from_arrays({"j": status}, {"j": seconds}, NO_TEXT)
    parts = [({"j": status[:1]}, {"j": seconds[:1]}), ({"j": status[1:, :2]}, {"j": seconds[1:, :2]})]
    summed = sum(timing_summary(*part, NO_TEXT) for part in parts)
    table = timing_table_from_summary(summed, local_seconds_passes([s for _, s in parts]))
    pd.testing.assert_frame_equal(table, whole, check_exact=True)
    assert table["timed_prompts"].tolist() == [1] and table["seconds_median"].tolist() == [3.0]


def test_policy_cost_summaries_of_other_tables_do_not_add() -> None:
    one = PolicyCostSummary(((1, (1,), 2.0, 1, True),))
    with pytest.raises(ValueError, match="same policies table"):
        one + PolicyCostSummary(())
    assert (one + one).rows == ((2, (2,), 4.0, 2, True),)
