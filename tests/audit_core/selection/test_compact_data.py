"""What keeps a large study small: candidate ids in a `StringDType` array, the tie order hashed in chunks
and kept as int8, no vote-variance array when there are no votes, prompt-local methods a chunk of
prompts at a time; each equal to the plain computation."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.dtypes import StringDType

from audit_core import store
from audit_core.selection import position
from audit_core.selection.data import cell_variances, load_selection_data
from audit_core.selection.debiased import calls, ties
from audit_core.selection.debiased.borda import borda_picks
from audit_core.selection.debiased.calibrated import calibrated_picks
from audit_core.stats.id_hash import id_hash
from tests.support.debiased import stored_calls

ID_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(ID_TEXT, st.lists(ID_TEXT, min_size=1, max_size=5, unique=True)), min_size=1, max_size=7),
       st.integers(1, 4))
def test_the_tie_order_in_chunks_is_the_rank_of_each_ids_hash(pools, chunk) -> None:
    width = max(len(c) for _, c in pools)
    prompt_ids = np.array([p for p, _ in pools], dtype=object)
    candidates = np.array([c + [""] * (width - len(c)) for _, c in pools], dtype=object)
    mask = np.array([[i < len(c) for i in range(width)] for _, c in pools])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ties, "TIE_CHUNK", chunk)
        order = ties.tie_order(prompt_ids, candidates, mask)
    assert order.dtype == np.int8
    for row, (prompt, pool) in enumerate(pools):
        keys = [id_hash(f"{prompt}/{c}", "tie") for c in pool]
        assert order[row, :len(pool)].tolist() == np.argsort(np.argsort(keys, kind="stable"), kind="stable").tolist()
        assert (order[row, len(pool):] == -1).all()
    # the same order from ids held as StringDType, as `load_selection_data` holds them
    assert np.array_equal(ties.tie_order(prompt_ids, candidates.astype(StringDType()), mask), order)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 5)), max_size=40))
def test_vote_variances_are_numpys_population_variance_per_cell(votes) -> None:
    cells = np.array([c for c, _ in votes], dtype=np.int64)
    values = np.array([v for _, v in votes], dtype=float)
    variance = cell_variances(cells, values, (2, 3))
    for cell in range(6):
        mine = values[cells == cell]
        expected = np.var(mine) if len(mine) >= 2 else np.nan
        np.testing.assert_allclose(variance.ravel()[cell], expected, rtol=1e-12, atol=1e-12, equal_nan=True)
    if not votes:  # nothing recorded: one NaN seen six times, no array of them
        assert variance.strides == (0, 0) and not variance.flags.writeable


def test_the_loaded_ids_are_compact_and_equal_the_stores(judgeacts_db) -> None:
    con = store.connect(judgeacts_db, read_only=True)
    try:
        data = load_selection_data(con, "main")
        rows = con.execute("SELECT prompt_id, canonical_index, candidate_id FROM candidates WHERE dataset_id = 'main'"
                           ).fetchall()
    finally:
        con.close()
    assert isinstance(data.candidate_ids.dtype, StringDType)
    row_of = {p: i for i, p in enumerate(data.prompts["prompt_id"])}
    assert sorted((data.prompts["prompt_id"][r], c, str(data.candidate_ids[r, c]))
                  for r, c in zip(*np.nonzero(data.mask))) == sorted(rows)
    assert all(data.candidate_ids[row_of[p], c] == cid for p, c, cid in rows)
    assert (data.candidate_ids[~data.mask] == "").all()


def test_prompt_local_methods_in_chunks_of_three_prompts_equal_one_chunk(judgeacts_db, monkeypatch) -> None:
    """Borda, calibrated, the generator-by-slot table and the order entropy work CALL_CHUNK prompts at a
    time; chunks of 3
    (uneven: the split has hundreds of prompts) give the same picks, scores and counts as one chunk."""
    data, ordered = stored_calls(judgeacts_db, "main")

    def everything() -> list:
        out = []
        for judge, mine in ordered.items():
            borda, calibrated = borda_picks(mine), calibrated_picks(mine)
            out += [borda.pick, borda.points, borda.full, borda.fallback, borda.abstained, calibrated.pick,
                    calibrated.scores, calibrated.partial, calibrated.abstained,
                    position.generator_slot_table(data, judge, mine),
                    position.order_entropy(data.picks[judge], data.pool_sizes, data.mask.shape[1])]
        return out

    whole = everything()
    monkeypatch.setattr(calls, "CALL_CHUNK", 3)
    assert data.n_prompts > 3 * 10 and len(calls.prompt_chunks(data.n_prompts)) > 10
    for one, chunked in zip(whole, everything(), strict=True):
        if isinstance(one, pd.DataFrame):
            pd.testing.assert_frame_equal(chunked, one, check_exact=True)
        else:
            assert one.dtype == chunked.dtype and np.array_equal(one, chunked, equal_nan=one.dtype.kind == "f")


def test_calls_loaded_a_few_entries_at_a_time_equal_one_pass_and_share_their_ids(judgeacts_db, tmp_path,
                                                                                 monkeypatch) -> None:
    """Entries scattered 7 at a time give the arrays one pass gives, a ranking with a label beyond its pool
    (so no ranking for that call) included; every judge's calls hold the same prompt-id array."""
    db = tmp_path / "odd.duckdb"
    shutil.copy(judgeacts_db, db)
    con = store.connect(db)
    try:
        con.execute("UPDATE calls SET ranking = ['A', 'B', 'E'] WHERE ranking IS NOT NULL AND order_index = 1 AND "
                    "prompt_id = (SELECT min(prompt_id) FROM calls WHERE ranking IS NOT NULL)")
    finally:
        con.close()
    data, whole = stored_calls(db, "main")
    monkeypatch.setattr(calls, "ENTRY_CHUNK", 7)
    _, chunked = stored_calls(db, "main")
    for judge, mine in whole.items():
        for field in ("slot_order", "rankings", "seconds", "picks", "tie_ranks"):
            one, other = getattr(mine, field), getattr(chunked[judge], field)
            assert one.dtype == other.dtype and np.array_equal(one, other, equal_nan=one.dtype.kind == "f"), field
        assert mine.prompt_ids is next(iter(whole.values())).prompt_ids
    assert any((mine.rankings >= 0).any() for mine in whole.values())
    assert list(next(iter(whole.values())).prompt_ids) == list(data.prompts["prompt_id"])
