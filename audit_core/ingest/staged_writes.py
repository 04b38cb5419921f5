"""Staged tables checked and written to the store in one transaction, from DuckDB to DuckDB.

`write_staged_dataset` is `pools.write_dataset` for tables read by `tables`: the same checks (in
SQL, `staged_checks`), run before the store is opened, then one transaction that writes the pools
(`pools.write_pools`, with `staged.StagedPools`' hashes and rows) and every judge's rows with
INSERT … SELECT from the staged databases attached to the store's connection, never through Python
objects per row. The same idempotence holds: the same pools again are 'unchanged', the same file
under the same judge name too (the run id carries the file's hash); different content is refused
unless `replace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from audit_core import store
from audit_core.errors import InputError
from audit_core.ingest import pools as pool_writes
from audit_core.ingest import staged_checks
from audit_core.ingest.pools import _claim_judge, _record_import_run, file_sha256
from audit_core.ingest.staged import StagedPools, StagedRun, count, status_counts
from audit_core.ingest.staging import attached
from audit_core.ingest.values import name
from audit_core.user_text import shown


def write_staged_dataset(
    db: str | Path,
    pools: StagedPools,
    runs: Sequence[StagedRun] = (),
    *,
    replace: bool = False,
) -> list[str]:
    """Check everything, then write the pools and every judge's staged rows in one transaction.

    `runs` hold calls, scores, rating calls or answers (`StagedRun.table`). Checks run before the
    database is opened, so bad input never even creates the file; a failure after this call created
    it removes it again (`store.writing`). Returns one report line per part written. Prompts need
    ≥ MIN_POOL_SIZE candidates only when selector decisions come with them.
    """
    names = [run.judge for run in runs]
    for given, what in ((pools.dataset_id, "dataset"), *((n, "judge") for n in names)):
        name(given, what)
    selector_calls = any(run.table == "calls" for run in runs)
    workspace = pools.stage.workspace
    for run in runs:
        run.stage.join(workspace)
    con = workspace.con.cursor()
    try:
        staged_checks.check_pools(con, pools, selector_calls=selector_calls)
        for table in ("answers", "calls", "scores", "rating_calls"):  # the order write_dataset checks them in
            for run in runs:
                if run.table == table:
                    _CHECKS[table](con, run, run.stage.alias)
    finally:
        con.close()
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InputError(f"judge name {shown(repeated[0])} is given twice; every run needs its own name")
    aliases = {f"run{k}": run for k, run in enumerate(runs)}
    with store.writing(db) as con:
        with attached(con, {"pools": pools.stage, **{a: run.stage for a, run in aliases.items()}}):
            with store.transaction(con):
                report = [f"pools: {pool_writes.write_pools(con, pools, replace=replace)}"]
                ordered = sorted(aliases.items(), key=lambda item: ("calls", "scores", "rating_calls", "answers")
                                 .index(item[1].table))
                report += [_WRITERS[run.table](con, pools.dataset_id, run, alias, replace) for alias, run in ordered]
    return report


_CHECKS = {"calls": staged_checks.check_calls, "scores": staged_checks.check_scores,
           "rating_calls": staged_checks.check_ratings, "answers": staged_checks.check_answers}


def _claimed_run(con: duckdb.DuckDBPyConnection, dataset_id: str, run: StagedRun, replace: bool,
                 middle: str = "") -> tuple[str, str | None, str]:
    """(run id, None / 'replaced' / 'unchanged', the file's sha256) of an imported run (`pools._claim_judge`)."""
    source_sha = file_sha256(run.source_file)
    run_id = f"{dataset_id}:{run.judge}:import:{middle}{source_sha[:16]}"
    return run_id, _claim_judge(con, dataset_id, run.judge, run_id, run.source_file, replace), source_sha


def _keyed(first: str, second: str) -> str:
    """SQL: request_key = sha256('run_id|first|second') (`pools._stamped`), run_id the first parameter."""
    return f"sha256(? || '|' || {first} || '|' || CAST({second} AS VARCHAR))"


def _write_calls(con: duckdb.DuckDBPyConnection, dataset_id: str, run: StagedRun, alias: str, replace: bool) -> str:
    run_id, claimed, sha = _claimed_run(con, dataset_id, run, replace)
    counts, n = status_counts(con, f"{alias}.calls"), count(con, f"{alias}.calls")
    if claimed != "unchanged":
        config = {"source_file": str(run.source_file), "source_sha256": sha}
        now = _record_import_run(con, dataset_id, run_id, run.judge, "selector", config)
        columns = ("prompt_id, order_index, slot_candidate_ids, status, choice_label, chosen_candidate_id, ranking, "
                   "raw_output, parse_note, attempts, seconds, input_json")
        # label probabilities as DuckDB writes their JSON (the same text whichever reader staged them)
        con.execute(f"INSERT INTO calls (run_id, {columns}, label_probs, request_key, created_at) SELECT ?, {columns}, "
                    f"CAST(json(label_probs) AS VARCHAR), {_keyed('prompt_id', 'order_index')}, ? FROM {alias}.calls",
                    [run_id, run_id, now])
    return f"judge {run.judge}: {claimed or 'created'}, {n} calls {counts}"


def _write_scores(con: duckdb.DuckDBPyConnection, dataset_id: str, run: StagedRun, alias: str, replace: bool) -> str:
    run_id, claimed, sha = _claimed_run(con, dataset_id, run, replace)
    if claimed != "unchanged":
        config = {"source_file": str(run.source_file), "source_sha256": sha}
        _record_import_run(con, dataset_id, run_id, run.judge, "scorer", config)
        con.execute(f"INSERT INTO scores (run_id, candidate_id, score) SELECT ?, candidate_id, score FROM {alias}.scores",
                    [run_id])
    return f"scorer {run.judge}: {claimed or 'created'}, {count(con, f'{alias}.scores')} scores"


def _write_ratings(con: duckdb.DuckDBPyConnection, dataset_id: str, run: StagedRun, alias: str, replace: bool) -> str:
    run_id, claimed, sha = _claimed_run(con, dataset_id, run, replace, f"{run.outcome}:")
    counts, n = status_counts(con, f"{alias}.rating_calls"), count(con, f"{alias}.rating_calls")
    if claimed != "unchanged":
        config = {"source_file": str(run.source_file), "source_sha256": sha, "outcome": run.outcome,
                  "scale": list(run.scale)}
        now = _record_import_run(con, dataset_id, run_id, run.judge, "rater", config)
        columns = "candidate_id, condition, status, rating, raw_output, parse_note, attempts, seconds, input_json"
        con.execute(f"INSERT INTO rating_calls (run_id, {columns}, request_key, created_at) SELECT ?, {columns}, "
                    f"{_keyed('candidate_id', 'condition')}, ? FROM {alias}.rating_calls", [run_id, run_id, now])
    return f"rater {run.judge}: {claimed or 'created'}, {n} ratings of {run.outcome} {counts}"


def _write_answers(con: duckdb.DuckDBPyConnection, dataset_id: str, run: StagedRun, alias: str, replace: bool) -> str:
    """An attribute judge's run: one label_calls row per (image, condition), its answers in label_answers
    (`labelers.ImportedLabeler.write`)."""
    run_id, claimed, sha = _claimed_run(con, dataset_id, run, replace)
    counts = status_counts(con, f"{alias}.answers")
    calls = count(con, f"(SELECT DISTINCT candidate_id, condition FROM {alias}.answers)")
    summary = f"{calls} calls, {count(con, f'{alias}.answers')} answers {counts}"
    if claimed == "unchanged":
        return f"labeler {run.judge}: unchanged, {summary}"
    tax = run.taxonomy
    config = {"source_file": str(run.source_file), "source_sha256": sha,
              "taxonomy": {"name": tax.name, "version": tax.version, "sha256": tax.sha256}}
    now = _record_import_run(con, dataset_id, run_id, run.judge, "labeler", config)
    # an imported call is a table's rows, not a text to parse: its status is 'ok', each field's status its own
    con.execute(f"INSERT INTO label_calls (run_id, candidate_id, condition, status, attempts, request_key, created_at) "
                f"SELECT ?, candidate_id, condition, 'ok', 1, {_keyed('candidate_id', 'condition')}, ? FROM "
                f"(SELECT candidate_id, condition, min(ord) AS first FROM {alias}.answers GROUP BY ALL) ORDER BY first",
                [run_id, run_id, now])
    con.execute(f"INSERT INTO label_answers (run_id, request_key, candidate_id, condition, attribute, status, label, "
                f"answer, rationale) SELECT ?, {_keyed('candidate_id', 'condition')}, candidate_id, condition, attribute, "
                f"status, label, answer, rationale FROM {alias}.answers", [run_id, run_id])
    return f"labeler {run.judge}: {claimed or 'created'}, {summary}"


_WRITERS = {"calls": _write_calls, "scores": _write_scores, "rating_calls": _write_ratings, "answers": _write_answers}
