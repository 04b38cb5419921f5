"""Staged tables checked against one another, in SQL: the rules `pools.check_pools`, `check_calls`,
`check_scores`, `check_ratings` and `ImportedLabeler.check` state for pandas frames, with their messages.

Each check runs on a connection with the staged databases attached (`staging.attached`): the
dataset's as `pools`, each judge's under its own alias. A check finds the first offending row in
the order the readers met the rows (`ord`) and raises InputError naming its file, line and field,
as the pandas checks do; a selector's call that fails is described by `pools.call_problem`, the same
code that describes it for the other importers.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pyarrow as pa

from audit_core.errors import InputError
from audit_core.ingest.cell_sql import identifier, literal
from audit_core.ingest.pools import CHOSEN_STATUSES, MIN_POOL_SIZE, UTILITY, call_problem
from audit_core.ingest.staged import StagedPools, StagedRun, count, utility_pools
from audit_core.store.schema import CALL_STATUSES, OUTCOME_SCALES, RATING_STATUSES
from audit_core.user_text import excerpt, shown


def _first(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence = ()) -> dict | None:
    """The first row `sql` returns, as a dict, or None."""
    cursor = con.execute(sql, list(params))
    rows = cursor.fetchall()  # to the end: DuckDB takes no other statement while a result is unfinished
    return dict(zip([d[0] for d in cursor.description], rows[0])) if rows else None


def _repeated(con: duckdb.DuckDBPyConnection, table: str, keys: str) -> dict | None:
    """The first row of `table` (by ord) whose `keys` an earlier row has, with `earlier`: the line of the first
    row with those keys (found by a hash aggregate, not a sort)."""
    located = "arg_min(line, ord)" if "line" in _columns(con, table) else "NULL"
    return _first(con, f"""
        WITH firsts AS (SELECT {keys}, min(ord) AS first, {located} AS earlier FROM {table} GROUP BY {keys}
                        HAVING count(*) > 1)
        SELECT t.*, f.earlier FROM {table} t JOIN firsts f USING ({keys}) WHERE t.ord > f.first ORDER BY t.ord LIMIT 1""")


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description]


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]::VARCHAR[]"


def check_pools(con: duckdb.DuckDBPyConnection, pools: StagedPools, *, selector_calls: bool) -> None:
    """Raise InputError unless the staged pools (attached as `pools`) are well formed (`pools.check_pools`)."""
    source = pools.source

    def fail(message: str, row: dict, field: str) -> None:
        raise InputError(message, file=row.get("file") or source, line=row.get("line"), field=field)

    for table, key, what in (("prompts", "prompt_id", "prompt id"), ("candidates", "candidate_id", "candidate id")):
        row = _repeated(con, f"pools.{table}", key)
        if row:
            fail(f"{what} {shown(row[key])} appears twice", row, key)
    row = _first(con, "SELECT prompt_id, line FROM pools.candidates WHERE prompt_id NOT IN "
                      "(SELECT prompt_id FROM pools.prompts) ORDER BY ord LIMIT 1")
    if row:
        fail(f"candidate of unknown prompt {shown(row['prompt_id'])}", row, "prompt_id")
    utility = utility_pools(con, "pools.ratings")
    selection = ["selector decisions"] if selector_calls else []
    selection += [f"{UTILITY} ratings, the selection audit's utility"] if utility else []
    row = _first(con, "SELECT p.prompt_id, p.line, count(c.candidate_id) AS n FROM pools.prompts p LEFT JOIN "
                      "pools.candidates c USING (prompt_id) GROUP BY p.prompt_id, p.line, p.ord HAVING n < ? "
                      "ORDER BY p.ord LIMIT 1", [MIN_POOL_SIZE if selection else 1])
    if row:
        need = (f"a pool needs at least {MIN_POOL_SIZE} where a selection audit applies (this dataset has "
                f"{' and '.join(selection)}; without them, one image per prompt suits rating and attribute judges)"
                if selection else "a prompt needs at least one")
        fail(f"prompt {shown(row['prompt_id'])} has {row['n']} candidate(s); {need}", row, "candidates")
    if not (count(con, "pools.ratings") or count(con, "pools.votes") or count(con, "pools.gold_labels")):
        raise InputError("no ratings and no votes (nor gold labels): nothing to audit the judges against "
                         "(give an alignment rating per candidate, votes, or gold labels)", file=source)
    _check_values(con, pools, fail)
    row = _repeated(con, "pools.votes", "candidate_id, outcome, pool, annotator")
    if row:
        fail(f"annotator {shown(row['annotator'])} rated {shown(row['candidate_id'])} twice for {row['outcome']} in "
             f"pool {shown(row['pool'])}", row, "annotator")
    row = _first(con, "SELECT candidate_id, line FROM pools.attributes WHERE candidate_id NOT IN "
                      "(SELECT candidate_id FROM pools.candidates) ORDER BY ord LIMIT 1")
    if row:
        fail(f"attribute of unknown candidate {shown(row['candidate_id'])}", row, "candidate_id")
    row = _repeated(con, "pools.attributes", "candidate_id, attribute")
    if row:
        fail(f"candidate {shown(row['candidate_id'])} has attribute {shown(row['attribute'])} twice", row,
             excerpt(row["attribute"]))
    _check_gold_labels(con, pools, fail)
    for pool in utility:
        row = _first(con, f"""SELECT candidate_id, line, (SELECT count(*) FROM pools.candidates) AS total,
                                     (SELECT count(*) FROM pools.candidates WHERE candidate_id IN ({_rated()})) AS rated
                              FROM pools.candidates WHERE candidate_id NOT IN ({_rated()}) ORDER BY ord LIMIT 1""",
                     [pool, pool])
        if row:
            fail(f"candidate {shown(row['candidate_id'])} has no {UTILITY} rating in pool {shown(pool)} ({row['rated']} "
                 f"of {row['total']} candidates have one): a pool's {UTILITY}, the selection audit's utility, "
                 "rates every candidate or none", {"line": row["line"]}, UTILITY)


def _rated() -> str:
    return f"SELECT candidate_id FROM pools.ratings WHERE outcome = {literal(UTILITY)} AND pool = ?"


def _check_values(con: duckdb.DuckDBPyConnection, pools: StagedPools, fail) -> None:
    """Votes, then ratings: a known candidate, a finite value, a declared outcome, on its scale."""
    scales = {**pools.scales, **OUTCOME_SCALES}
    known = pa.table({"outcome": list(scales), "lo": [float(lo) for lo, _ in scales.values()],
                      "hi": [float(hi) for _, hi in scales.values()]})
    con.register("outcome_scales", known)
    try:
        for table in ("votes", "ratings"):
            # one pass finds the first row failing each rule; the rules are then told in their order
            (stray, infinite, undeclared, off), = con.execute(f"""
                SELECT min(t.ord) FILTER (WHERE c.candidate_id IS NULL), min(t.ord) FILTER (WHERE NOT isfinite(t.value)),
                       min(t.ord) FILTER (WHERE s.outcome IS NULL),
                       min(t.ord) FILTER (WHERE t.value < s.lo OR t.value > s.hi)
                FROM pools.{table} t LEFT JOIN (SELECT DISTINCT candidate_id FROM pools.candidates) c USING (candidate_id)
                LEFT JOIN outcome_scales s USING (outcome)""").fetchall()
            first = next((ord for ord in (stray, infinite, undeclared, off) if ord is not None), None)
            if first is None:
                continue
            field = "'value'" if table == "votes" else "coalesce(field, outcome)"
            row = _first(con, f"SELECT *, {field} AS located FROM pools.{table} WHERE ord = ?", [first])
            if first == stray:
                fail(f"{table} for unknown candidate {shown(row['candidate_id'])}", row, "candidate_id")
            if first == infinite:
                fail(f"{row['outcome']} rating {shown(row['value'])} of {shown(row['candidate_id'])} is not a finite "
                     "number", row, row["located"])
            if first == undeclared:
                fail(f"outcome {shown(row['outcome'])} has no declared scale", row, row["located"])
            lo, hi = scales[row["outcome"]]
            fail(f"{row['outcome']} rating {shown(float(row['value']))} of {shown(row['candidate_id'])} is off its "
                 f"scale [{lo:g}, {hi:g}]", row, row["located"])
    finally:
        con.unregister("outcome_scales")


def _check_gold_labels(con: duckdb.DuckDBPyConnection, pools: StagedPools, fail) -> None:
    """Gold labels: of a known candidate, once per attribute, an attribute of the taxonomy, one of its answers."""
    if not count(con, "pools.gold_labels"):
        return
    taxonomy = pools.taxonomy
    if taxonomy is None:
        raise InputError("gold labels without a taxonomy to check them against", file=pools.source)
    row = _first(con, "SELECT * FROM pools.gold_labels WHERE candidate_id NOT IN (SELECT candidate_id FROM "
                      "pools.candidates) ORDER BY ord LIMIT 1")
    if row:
        fail(f"gold label of unknown candidate {shown(row['candidate_id'])}", row, "candidate_id")
    row = _repeated(con, "pools.gold_labels", "candidate_id, attribute")
    if row:
        fail(f"candidate {shown(row['candidate_id'])} has two gold labels for {shown(row['attribute'])}", row,
             "attribute")
    answers = {a.name: set(a.answers()) for a in taxonomy.attributes}
    rows = pa.table({"attribute": [a for a, labels in answers.items() for _ in labels],
                     "label": [label for labels in answers.values() for label in labels]},
                    schema=pa.schema([("attribute", pa.string()), ("label", pa.string())]))
    con.register("taxonomy_answers", rows)
    try:
        row = _first(con, "SELECT * FROM pools.gold_labels WHERE attribute NOT IN (SELECT attribute FROM "
                          "taxonomy_answers) ORDER BY ord LIMIT 1")
        if row:
            fail(f"attribute {shown(row['attribute'])} is not in taxonomy {shown(taxonomy.name)} "
                 f"({', '.join(answers)})", row, "attribute")
        row = _first(con, "SELECT * FROM pools.gold_labels g WHERE NOT EXISTS (SELECT 1 FROM taxonomy_answers t WHERE "
                          "t.attribute = g.attribute AND t.label = g.label) ORDER BY ord LIMIT 1")
        if row:
            fail(f"{shown(row['label'])} is not a label of {shown(row['attribute'])} "
                 f"({', '.join(sorted(answers[row['attribute']]))})", row, "label")
    finally:
        con.unregister("taxonomy_answers")


def check_calls(con: duckdb.DuckDBPyConnection, run: StagedRun, alias: str) -> None:
    """Raise InputError unless every staged call (attached as `alias`) is consistent with the pools
    (`pools.check_calls`): the first call failing a rule is described by `pools.call_problem`."""
    calls = f"{identifier(alias)}.calls"
    labels = "list_transform(range(len(slot_candidate_ids)), lambda i: chr(CAST(65 + i AS INTEGER)))"
    # each prompt's candidate ids, sorted: made once per connection for every judge's calls
    con.execute("CREATE TEMP TABLE IF NOT EXISTS pool_members AS SELECT prompt_id, "
                "list(candidate_id ORDER BY candidate_id) AS pool FROM pools.candidates GROUP BY prompt_id")
    row = _first(con, f"""
        WITH members AS (SELECT * FROM pool_members),
             repeated AS (SELECT prompt_id, order_index, min(ord) AS first FROM {calls} GROUP BY ALL HAVING count(*) > 1),
             numbered AS (SELECT c.*, m.pool, coalesce(c.ord > r.first, false) AS again
                          FROM {calls} c LEFT JOIN members m USING (prompt_id)
                          LEFT JOIN repeated r USING (prompt_id, order_index))
        SELECT ord FROM numbered
        WHERE coalesce(pool IS NULL
           OR list_sort(slot_candidate_ids) <> pool
           OR NOT list_contains({_list(CALL_STATUSES)}, status)
           OR CASE WHEN list_contains({_list(CHOSEN_STATUSES)}, status)
                   THEN chosen_candidate_id IS NULL OR NOT list_contains(slot_candidate_ids, chosen_candidate_id)
                        OR choice_label IS DISTINCT FROM chr(CAST(64 + list_position(slot_candidate_ids, chosen_candidate_id) AS INTEGER))
                   ELSE chosen_candidate_id IS NOT NULL OR choice_label IS NOT NULL END
           OR (ranking IS NOT NULL AND (len(list_distinct(ranking)) <> len(ranking)
                                        OR NOT list_has_all({labels}, ranking)))
           OR again, true)
        ORDER BY ord LIMIT 1""")
    if row is None:
        return
    call = _first(con, f"SELECT * FROM {calls} WHERE ord = ?", [row["ord"]])
    pool = _first(con, "SELECT list(candidate_id ORDER BY candidate_id) AS ids FROM pools.candidates WHERE prompt_id = ?",
                  [call["prompt_id"]])["ids"]
    earlier = _first(con, f"SELECT min(line) AS line FROM {calls} WHERE prompt_id = ? AND order_index = ? AND ord < ?",
                     [call["prompt_id"], call["order_index"], call["ord"]])["line"]
    problem = call_problem(_Call(call), pool, earlier)
    if problem is None:  # the SQL and the rules disagree: say so rather than pass the call
        raise InputError("call refused by the checks but not described", file=run.source_file, line=call["line"])
    field, message = problem
    raise InputError(message, file=run.source_file, line=call["line"], field=field)


class _Call:
    """A staged call's columns as attributes, as `pools.call_problem` reads a frame's rows."""

    def __init__(self, row: dict) -> None:
        self.__dict__.update(row)


def check_scores(con: duckdb.DuckDBPyConnection, run: StagedRun, alias: str) -> None:
    """Raise InputError unless there is exactly one score per candidate (`pools.check_scores`)."""
    scores = f"{identifier(alias)}.scores"
    where = {"file": run.source_file, "field": "scores"}
    row = _repeated(con, scores, "candidate_id")
    if row:
        raise InputError(f"candidate {shown(row['candidate_id'])} is scored twice", **where)
    row = _first(con, f"SELECT min(candidate_id) AS id, count(*) AS n FROM (SELECT candidate_id FROM {scores} "
                      "EXCEPT SELECT candidate_id FROM pools.candidates)")
    if row["n"]:
        raise InputError(f"unknown candidate id {shown(row['id'])} ({row['n']} unknown in all)", **where)
    row = _first(con, f"SELECT min(candidate_id) AS id, count(*) AS n FROM (SELECT candidate_id FROM pools.candidates "
                      f"EXCEPT SELECT candidate_id FROM {scores})")
    if row["n"]:
        raise InputError(f"no score for candidate {shown(row['id'])} ({row['n']} missing in all)", **where)


def check_ratings(con: duckdb.DuckDBPyConnection, run: StagedRun, alias: str) -> None:
    """Raise InputError unless every staged rating call is consistent with the pools (`pools.check_ratings`)."""
    calls = f"{identifier(alias)}.rating_calls"
    lo, hi = run.scale

    def first(condition: str) -> dict | None:
        return _first(con, f"SELECT * FROM {calls} WHERE {condition} ORDER BY ord LIMIT 1")

    def fail(row: dict, column: str, message: str) -> None:
        raise InputError(message, file=run.source_file, line=row["line"], field=column)

    row = first("candidate_id NOT IN (SELECT candidate_id FROM pools.candidates)")
    if row:
        fail(row, "candidate_id", f"unknown candidate id {shown(row['candidate_id'])}")
    row = first(f"NOT list_contains({_list(RATING_STATUSES)}, status)")
    if row:
        fail(row, "status", f"status {shown(row['status'])} is not one of {', '.join(RATING_STATUSES)}")
    row = first("status = 'ok' AND rating IS NULL")
    if row:
        fail(row, "rating", "status 'ok' needs a rating")
    row = first(f"status = 'ok' AND NOT (rating BETWEEN {lo} AND {hi} AND rating = floor(rating))")
    if row:
        fail(row, "rating", f"expected an integer from {lo} to {hi}, got {shown(row['rating'])}")
    row = first("status <> 'ok' AND rating IS NOT NULL")
    if row:
        fail(row, "rating", f"a call with status {shown(row['status'])} has no rating (only 'ok' calls carry one)")
    row = _repeated(con, calls, "candidate_id, condition")
    if row:
        fail(row, "candidate_id", f"duplicate call: candidate {shown(row['candidate_id'])} under condition "
                                  f"{shown(row['condition'])} was already recorded on line {row['earlier']}")


def check_answers(con: duckdb.DuckDBPyConnection, run: StagedRun, alias: str) -> None:
    """Raise InputError unless every staged answer is of a known candidate, once per (image, condition,
    attribute) (`labelers.ImportedLabeler.check`)."""
    answers = f"{identifier(alias)}.answers"
    row = _first(con, f"SELECT * FROM {answers} WHERE candidate_id NOT IN (SELECT candidate_id FROM pools.candidates) "
                      "ORDER BY ord LIMIT 1")
    if row:
        raise InputError(f"unknown candidate id {shown(row['candidate_id'])}", file=run.source_file, line=row["line"],
                         field="candidate_id")
    row = _repeated(con, answers, "candidate_id, condition, attribute")
    if row:
        raise InputError(f"duplicate answer: candidate {shown(row['candidate_id'])} attribute {shown(row['attribute'])} "
                         f"under condition {shown(row['condition'])} was already given on line {row['earlier']}",
                         file=run.source_file, line=row["line"], field="attribute")
