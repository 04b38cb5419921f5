"""Fixtures the selection tests share: the JudgeActs main split, ingested once per module."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from audit_core import store
from audit_core.selection.data import SelectionData, load_selection_data
from runners import ingest
from tests.support.paths import JUDGEACTS_MAIN as JUDGEACTS


@pytest.fixture(scope="module")
def judgeacts_db(tmp_path_factory) -> Path:
    """A store holding the JudgeActs main split with Qwen and Smol as dataset `main`."""
    if not JUDGEACTS.is_dir():
        pytest.skip(f"{JUDGEACTS} is not available")
    db = tmp_path_factory.mktemp("ja") / "ja.duckdb"
    code = ingest.main([
        "judgeacts", "--pools", str(JUDGEACTS / "data/derived/main.jsonl"),
        "--run", f"qwen={JUDGEACTS / 'runs/qwen_main.jsonl'}",
        "--run", f"smol={JUDGEACTS / 'runs/smol_main.jsonl'}",
        "--db", str(db), "--dataset", "main",
    ])
    assert code == 0
    return db


@pytest.fixture(scope="module")
def judgeacts(judgeacts_db: Path) -> tuple[SelectionData, pd.DataFrame]:
    """(SelectionData, calls) of the JudgeActs main split with Qwen and Smol, the calls read as the
    audit reads them (`store.load_calls(..., ok_outputs=False)`)."""
    con = store.connect(judgeacts_db, read_only=True)
    try:
        return load_selection_data(con, "main"), store.load_calls(con, "main", ok_outputs=False)
    finally:
        con.close()
