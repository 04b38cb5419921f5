"""An attribute judge's answers recorded elsewhere (`--labeler NAME=FILE`), written as a 'labeler' run.

One label_calls row per (image, condition) and one label_answers row per attribute answered
(DESIGN §4c), with the same idempotence as imported selector and rating runs: the run id derives
from (dataset, judge, file hash), so the same file again changes nothing, and a different file
under a judge name already recorded is refused unless `replace`.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pandas as pd

from audit_core import store
from audit_core.attributes.taxonomy import Taxonomy
from audit_core.errors import InputError
from audit_core.ingest.pools import _claim_judge, _record_import_run, _stamped, file_sha256
from audit_core.user_text import shown

CALL_KEY = ("candidate_id", "condition")
ANSWER_COLUMNS = ("candidate_id", "condition", "attribute", "status", "label", "answer", "rationale")


@dataclass
class ImportedLabeler:
    """answers: ANSWER_COLUMNS (plus `line`), one row per (image, condition, attribute), each with its
    status (schema.LABEL_ANSWER_STATUSES) already decided against `taxonomy` by the reader."""

    judge: str
    source_file: str
    answers: pd.DataFrame
    taxonomy: Taxonomy

    def check(self, candidates: pd.DataFrame) -> None:
        """InputError (file, line, field) unless every answer is of a known candidate, once per
        (image, condition, attribute)."""
        answers = self.answers.reset_index(drop=True)

        def fail(mask: pd.Series, column: str, message: str) -> None:
            i = int(mask.to_numpy().argmax())
            raise InputError(message, file=self.source_file, line=int(answers["line"].iloc[i]), field=column)

        unknown = ~answers["candidate_id"].isin(candidates["candidate_id"])
        if unknown.any():
            fail(unknown, "candidate_id", f"unknown candidate id {shown(answers.loc[unknown, 'candidate_id'].iloc[0])}")
        dup = answers.duplicated(["candidate_id", "condition", "attribute"])
        if dup.any():
            row = answers.loc[dup].iloc[0]
            first = answers.loc[(answers["candidate_id"] == row["candidate_id"]) & (answers["condition"] == row["condition"])
                                & (answers["attribute"] == row["attribute"]), "line"].iloc[0]
            fail(dup, "attribute", f"duplicate answer: candidate {shown(row['candidate_id'])} attribute {shown(row['attribute'])} "
                                   f"under condition {shown(row['condition'])} was already given on line {int(first)}")

    def write(self, con: duckdb.DuckDBPyConnection, dataset_id: str, *, replace: bool) -> str:
        """Record the run (inside the caller's transaction); returns the report line."""
        self.check(store.load_candidates(con, dataset_id))
        source_sha = file_sha256(self.source_file)
        run_id = f"{dataset_id}:{self.judge}:import:{source_sha[:16]}"
        claimed = _claim_judge(con, dataset_id, self.judge, run_id, self.source_file, replace)
        counts = self.answers["status"].value_counts().to_dict()
        calls = self.answers[list(CALL_KEY)].drop_duplicates().reset_index(drop=True)
        summary = f"{len(calls)} calls, {len(self.answers)} answers {counts}"
        if claimed == "unchanged":
            return f"labeler {self.judge}: unchanged, {summary}"
        tax = self.taxonomy
        config = {"source_file": str(self.source_file), "source_sha256": source_sha,
                  "taxonomy": {"name": tax.name, "version": tax.version, "sha256": tax.sha256}}
        now = _record_import_run(con, dataset_id, run_id, self.judge, "labeler", config)
        # an imported call is a table's rows, not a text to parse: its status is 'ok', each field's status its own
        stamped = _stamped(calls.assign(status="ok", raw_output=None, parse_note=None, attempts=1, seconds=None,
                                        input_json=None), run_id, now, CALL_KEY)
        store.insert_frame(con, "label_calls", stamped)
        keyed = self.answers.merge(stamped[[*CALL_KEY, "request_key"]], on=list(CALL_KEY))
        store.insert_frame(con, "label_answers", keyed.assign(run_id=run_id))
        return f"labeler {self.judge}: {claimed or 'created'}, {summary}"
