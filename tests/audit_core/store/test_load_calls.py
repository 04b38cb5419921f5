"""`store.load_calls` with `columns`: only those columns, compact (categoricals, small integers), the same
values as the full frame; and the audit reads the calls that way with every table unchanged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, audit_selection, load_selection_data, store
from audit_core.selection.audit import CALL_COLUMNS
from audit_core.store.database import CALL_COLUMNS as EVERY_CALL_COLUMN
from benchmarks.synthetic import build_synthetic_db


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("calls") / "syn.duckdb"
    build_synthetic_db(db, n_prompts=300, seed=3)
    return db


def _plain(value: object) -> object:
    """A cell as comparable Python: lists for list cells (DuckDB's lists, Arrow's arrays), None for nulls."""
    if isinstance(value, (list, np.ndarray)):
        return list(value)
    return None if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) else value


def test_named_columns_come_compact_with_the_full_frames_values(synthetic_db):
    con = store.connect(synthetic_db, read_only=True)
    try:
        dataset = store.list_datasets(con)["dataset_id"].iloc[0]
        every = store.load_calls(con, dataset, ok_outputs=False)
        some = store.load_calls(con, dataset, ok_outputs=False, columns=CALL_COLUMNS)
        one_judge = store.load_calls(con, dataset, ["slot_b"], columns=["prompt_id", "raw_output"])
        one_judge_every = store.load_calls(con, dataset, ["slot_b"])
        with pytest.raises(ValueError, match="no column 'input_json'"):
            store.load_calls(con, dataset, columns=["judge", "input_json"])
    finally:
        con.close()
    assert list(every.columns) == list(EVERY_CALL_COLUMN) and list(some.columns) == list(CALL_COLUMNS)
    assert len(some) == len(every) == 300 * 3 * 3
    for column in CALL_COLUMNS:
        assert [_plain(v) for v in some[column]] == [_plain(v) for v in every[column]], column
    for column in ("judge", "prompt_id", "status"):
        assert isinstance(some[column].dtype, pd.CategoricalDtype)
    assert some["order_index"].dtype == np.int8
    # a judge's calls only, and ok_outputs True (the default) keeps the accepted calls' outputs
    assert list(one_judge.columns) == ["prompt_id", "raw_output"] and len(one_judge) == 300 * 3
    for column in one_judge.columns:
        assert [_plain(v) for v in one_judge[column]] == [_plain(v) for v in one_judge_every[column]], column
    assert some["raw_output"].notna().sum() == (every["status"] != "ok").sum() > 0


def test_the_audit_of_compact_calls_equals_the_audit_of_the_full_frame(synthetic_db):
    con = store.connect(synthetic_db, read_only=True)
    try:
        dataset = store.list_datasets(con)["dataset_id"].iloc[0]
        data = load_selection_data(con, dataset)
        every = store.load_calls(con, dataset, ok_outputs=False)
        some = store.load_calls(con, dataset, ok_outputs=False, columns=CALL_COLUMNS)
    finally:
        con.close()
    expected = audit_selection(data, Resampling(50, 1), calls=every).tables()
    got = audit_selection(data, Resampling(50, 1), calls=some).tables()
    assert expected.keys() == got.keys()
    for name in expected:
        pd.testing.assert_frame_equal(got[name], expected[name], check_dtype=False, obj=name)
