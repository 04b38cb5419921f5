"""The check that a judge's earlier records under a condition would resume: the same request keys as planned now."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import duckdb
import pandas as pd

from audit_core.errors import InputError


class PlannedRequest(Protocol):
    candidate_id: str
    condition: str
    request_key: str


def check_condition_keys(
    con: duckdb.DuckDBPyConnection,
    table: str,
    dataset: str,
    judge: str,
    requests: Sequence[PlannedRequest],
    cause: Callable[[str, pd.DataFrame], str],
) -> None:
    """Refuse records in `table` of a planned (candidate, condition) whose request key differs from the planned one.

    The InputError names the first such condition; `cause(condition, its stale records)` (columns
    candidate_id, condition, request_key, input_json, planned_key) says what changed since.
    """
    recorded = con.execute(
        f"SELECT c.candidate_id, c.condition, c.request_key, c.input_json FROM {table} c "
        "JOIN runs r USING (run_id) WHERE r.dataset_id = ? AND r.judge = ?",
        [dataset, judge],
    ).df()
    planned = pd.DataFrame({"candidate_id": [r.candidate_id for r in requests],
                            "condition": [r.condition for r in requests],
                            "planned_key": [r.request_key for r in requests]})
    stale = recorded.merge(planned, on=["candidate_id", "condition"])
    stale = stale[stale["request_key"] != stale["planned_key"]]
    if stale.empty:
        return
    name = stale["condition"].iloc[0]
    mine = stale[stale["condition"] == name]
    raise InputError(
        f"judge {judge!r} already has {len(mine)} records under condition {name!r} on dataset {dataset!r}, and "
        f"{cause(name, mine)}, so their request keys differ and nothing would resume. Give the condition a new "
        "name (a new conditions file version), choose a new --judge name, or pass --replace to delete the judge's "
        "earlier records.",
        field="--condition",
    )
