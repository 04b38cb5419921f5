"""The table contract's row rules as SQL over a staged file: find the first refused row, or type every row.

`staging.load_raw` leaves a file's cells in `raw`. For each kind of table (pools, votes, decisions,
scores, a rater's ratings, gold labels, an attribute judge's answers) the functions here

1. compute every field's clean value and whether its cell is refused (`cell_sql`), in `norm` (a
   table for pools, whose rules compare rows; a view, computed where it is read, for the others);
2. find the first line where any rule of the readers fails: a refused cell, a missing required
   field, a rule across fields (a choice label off the slots, a status needing a choice), and for
   pools the rules across rows (a repeated (candidate, pool), a prompt or candidate whose columns
   disagree with its first row) and the image files;
3. if there is one, hand that row (with the earlier rows it is compared with) to `describe`, the
   readers' own code, which raises the contract's error for it; else create the staged tables
   (`staged.SCHEMAS`) from `norm` in SQL.

Each returns False when `describe` finds nothing wrong with the row the SQL picked (a case the SQL
does not decide exactly, such as an id given as an integer beyond 64 bits): the caller then reads the
whole file row by row, so the outcome is always the readers'.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from audit_core.attributes.taxonomy import Taxonomy
from audit_core.errors import InputError
from audit_core.ingest import images, staged
from audit_core.ingest.cell_sql import SPACE_ONLY, Cell, identifier, literal
from audit_core.ingest.staging import RawTable, Staging, drop_work, python_rows
from audit_core.ingest.values import LABEL_PROBS_TOLERANCE
from audit_core.store.schema import CALL_STATUSES, DEFAULT_POOL, INTEGER_MAX

ID, TEXT, NUMBER, INTEGER, ITEMS, OBJECT = "id", "text", "number", "integer", "items", "object"
CHOSEN = ("ok", "recovered")
DEFAULT_CONDITION = "default"
ATTRIBUTE_COLUMN = re.compile(r"item_([A-Za-z0-9_]+)")
Describe = Callable[[list[tuple[int, dict]]], object]


@dataclass(frozen=True)
class Field:
    """A column the readers read, with the kind of value it holds (an integer's range [lo, hi])."""

    name: str
    kind: str
    required: bool = False
    lo: int = 0
    hi: int = INTEGER_MAX


def _value_and_bad(field: Field, cell: Cell | None) -> tuple[str, str]:
    """SQL for the field's clean value and for its cell being refused (a required field absent included)."""
    if cell is None:
        return "NULL", "true" if field.required else "false"
    value, bad = {
        ID: (cell.id_value, cell.id_bad), TEXT: (cell.text_value, cell.text_bad),
        NUMBER: (cell.number_value, cell.number_bad), ITEMS: (cell.items_value, cell.items_bad),
        OBJECT: (cell.object_value, cell.object_bad),
        INTEGER: (cell.integer_value, lambda: cell.integer_bad(field.lo, field.hi)),
    }[field.kind]
    refused = bad()
    if field.required:
        refused = f"({refused} OR NOT {cell.present()})"
    return value(), refused


def normalise(stage: Staging, raw: RawTable, fields: Sequence[Field], layers: Sequence[Mapping[str, str]] = (),
              kept_as: str = "TABLE") -> None:
    """Create `norm` (a TABLE, or a VIEW computed where it is read): per kept row its line, each field's clean
    value (named as the field), `refused` (some cell refused, or the row is no row the readers take) and the
    `layers` of derived columns, in order."""
    values, refusals = [], [*raw.structure]
    for field in fields:
        value, bad = _value_and_bad(field, raw.cells.get(field.name))
        values.append(f"{value} AS {identifier(field.name)}")
        refusals.append(bad)
    # a CSV row whose cells are all empty is skipped, not read (tables._csv_rows)
    kept = " OR ".join(c.present() for c in raw.cells.values()) if raw.form == "csv" else "true"
    select = (f"SELECT line, {', '.join(values)}, ({' OR '.join(refusals) or 'false'}) AS refused "
              f"FROM raw WHERE {kept}")
    for layer in layers:
        select = f"SELECT *, {', '.join(f'{sql} AS {identifier(name)}' for name, sql in layer.items())} FROM ({select})"
    stage.con.execute(f"CREATE OR REPLACE {kept_as} norm AS {select}")


def first_line(stage: Staging, rules: Sequence[str] = ()) -> int | None:
    """The first line of `norm` whose cells are refused or where one of `rules` (SQL) holds."""
    condition = " OR ".join(["refused", *(f"coalesce({r}, true)" for r in rules)])
    return stage.con.execute(f"SELECT min(line) FROM norm WHERE {condition}").fetchall()[0][0]


def refuse(stage: Staging, raw: RawTable, describe: Describe, lines: set[int]) -> None:
    """Run `describe` on the rows at `lines`: it raises the readers' error for the last of them. When it
    returns, the readers take that row after all (the SQL was not exact for it): the caller falls back."""
    describe(python_rows(raw, stage, sorted(lines)))


def _is_empty(stage: Staging) -> bool:
    return stage.con.execute("SELECT count(*) = 0 FROM norm").fetchall()[0][0]


def _done(stage: Staging) -> bool:
    drop_work(stage)
    return True


def _known_list(names: Sequence[str]) -> str:
    return "[" + ", ".join(literal(n) for n in names) + "]::VARCHAR[]"


# ---------------------------------------------------------------- pools

POOL_TEXT = ("prompt", "country", "category", "split", "source_model", "image_path")


def stage_pools(stage: Staging, raw: RawTable, describe: Describe, outcomes: Sequence[str], base: Path) -> bool:
    """Stage a pools table as prompts, candidates, ratings and attributes (tables._pool_records' rules)."""
    attributes = sorted(c for c in raw.cells if ATTRIBUTE_COLUMN.fullmatch(c))
    fields = [Field("prompt_id", ID, True), Field("candidate_id", ID, True), Field("pool", ID),
              *(Field(c, TEXT) for c in POOL_TEXT), *(Field(c, TEXT) for c in attributes), Field("n", INTEGER, lo=1),
              *(Field(o, NUMBER) for o in outcomes)]
    given = {c: f"CASE WHEN NOT regexp_full_match({identifier(c)}, {literal(SPACE_ONLY)}) THEN {identifier(c)} END"
             for c in attributes}  # an attribute that strips to nothing is absent (tables._attribute)
    normalise(stage, raw, fields, [{"pool_key": f"coalesce(pool, {literal(DEFAULT_POOL)})",
                                    **{f"given_{c}": sql for c, sql in given.items()}}])
    if _is_empty(stage):
        return False
    first = first_line(stage, ["prompt IS NULL"])
    image_failed = _check_images(stage, raw, describe, base, first)
    if image_failed is not None:
        first = image_failed
    agree = _first_disagreement(stage, attributes)
    if agree is not None and (first is None or agree < first):
        first = agree
    if first is not None:
        refuse(stage, raw, describe, _pool_context(stage, first))
        return False
    con = stage.con
    # a prompt's and a candidate's columns are those of its first row (the rest agree with it)
    staged.create(stage, "prompts", "SELECT min(line) AS ord, min(line) AS line, prompt_id, "
                                    "arg_min_null(prompt, line) AS prompt, arg_min_null(country, line) AS country, "
                                    "arg_min_null(category, line) AS category, arg_min_null(split, line) AS split "
                                    "FROM norm GROUP BY prompt_id")
    staged.create(stage, "candidates", "SELECT min(line) AS ord, min(line) AS line, "
                                       "arg_min_null(prompt_id, line) AS prompt_id, candidate_id, "
                                       "arg_min_null(source_model, line) AS source_model, "
                                       "arg_min_null(resolved, line) AS image_path "
                                       "FROM norm LEFT JOIN images ON image_path = text GROUP BY candidate_id")
    # ord = (line, place of the outcome): the order the readers append ratings in, without a sort
    step = len(outcomes) + 1
    ratings = " UNION ALL ".join(
        f"SELECT line * {step} + {k} AS ord, line, candidate_id, {literal(o)} AS outcome, pool_key AS pool, "
        f"{identifier(o)} AS value, n FROM norm WHERE {identifier(o)} IS NOT NULL"
        for k, o in enumerate(outcomes) if o in raw.cells)
    staged.create(stage, "ratings", f"SELECT ord, line, NULL AS file, NULL AS field, candidate_id, outcome, pool, value, n "
                                    f"FROM ({ratings})" if ratings else staged.empty("ratings"))
    firsts = ("(SELECT * FROM norm QUALIFY row_number() OVER (PARTITION BY candidate_id ORDER BY line) = 1)")
    values = " UNION ALL ".join(
        f"SELECT line * {len(attributes) + 1} + {k} AS ord, line, candidate_id, "
        f"{literal(ATTRIBUTE_COLUMN.fullmatch(c).group(1))} AS attribute, {identifier('given_' + c)} AS value "
        f"FROM {firsts} WHERE {identifier('given_' + c)} IS NOT NULL" for k, c in enumerate(attributes))
    staged.create(stage, "attributes", f"SELECT * FROM ({values})" if values else staged.empty("attributes"))
    con.execute("DROP TABLE images")
    return _done(stage)


def _check_images(stage: Staging, raw: RawTable, describe: Describe, base: Path, before: int | None) -> int | None:
    """Check each image path named before line `before` as the readers do (confined to `base`, an image that
    decodes); leave `images(text, resolved)`; the line of the first path refused, if any."""
    con = stage.con
    cursor = stage.cursor()  # a result of its own, left unfinished when a path fails
    found = cursor.execute("SELECT line, image_path FROM norm WHERE image_path IS NOT NULL AND line < ? ORDER BY line",
                           [before if before is not None else 2**62])
    resolved: dict[str, str] = {}
    failed = None
    while failed is None and (batch := found.fetchmany(4096)):
        for line, text in batch:
            if text in resolved:
                continue
            where = {"file": raw.path, "line": line}
            try:
                image = images.confined_path(text, base, "image_path", where)
                if not images.existing_file(image, "image_path", where):
                    raise InputError("no such file", file=raw.path, line=line)
                images.decoded_format(image, "image_path", where)
            except InputError:
                failed = line
                break
            resolved[text] = str(image)
    cursor.close()
    con.register("image_paths", pa.table({"text": list(resolved), "resolved": list(resolved.values())},
                                         schema=pa.schema([("text", pa.string()), ("resolved", pa.string())])))
    con.execute("CREATE OR REPLACE TABLE images AS SELECT * FROM image_paths")
    con.unregister("image_paths")
    return failed


def _first_disagreement(stage: Staging, attributes: Sequence[str]) -> int | None:
    """The first line repeating an earlier (candidate, pool), or whose prompt or candidate columns differ
    from that prompt's or candidate's first row (`tables._agree`). Plain aggregates find the groups that
    disagree at all (a column agrees when all its values are null, or none is and min = max); only rows of
    those groups are compared with their group's first row (arg_min_null keeps a first row's nulls)."""
    prompt_columns = ("prompt", "country", "category", "split")
    candidate_columns = ("prompt_id", "source_model", "resolved", *(f"given_{c}" for c in attributes))

    def agree(columns: Sequence[str]) -> str:
        return " AND ".join(f"(count({identifier(c)}) = 0 OR (count({identifier(c)}) = count(*) "
                            f"AND min({identifier(c)}) = max({identifier(c)})))" for c in columns)

    def first_differing(key: str, columns: Sequence[str], groups: str) -> str:
        picked = ", ".join(f"arg_min_null({identifier(c)}, line) AS {identifier(c)}" for c in columns)
        differs = " OR ".join(f"r.{identifier(c)} IS DISTINCT FROM f.{identifier(c)}" for c in columns)
        return (f"SELECT r.line FROM rows r JOIN (SELECT {key}, {picked} FROM rows WHERE {key} IN (SELECT {key} "
                f"FROM {groups}) GROUP BY {key}) f USING ({key}) WHERE {differs}")

    return stage.con.execute(f"""
        WITH rows AS (SELECT norm.*, resolved FROM norm LEFT JOIN images ON image_path = text),
             split_prompts AS (SELECT prompt_id FROM rows GROUP BY prompt_id HAVING NOT ({agree(prompt_columns)})),
             repeated AS (SELECT candidate_id, {agree(candidate_columns)} AS agreeing FROM rows GROUP BY candidate_id
                          HAVING count(*) > 1),
             split_candidates AS (SELECT candidate_id FROM repeated WHERE NOT agreeing),
             repeated_keys AS (SELECT candidate_id, pool_key, min(line) AS first FROM rows
                               WHERE candidate_id IN (SELECT candidate_id FROM repeated) GROUP BY ALL HAVING count(*) > 1)
        SELECT min(line) FROM (
            {first_differing("prompt_id", prompt_columns, "split_prompts")}
            UNION ALL
            {first_differing("candidate_id", candidate_columns, "split_candidates")}
            UNION ALL
            SELECT r.line FROM rows r JOIN repeated_keys k USING (candidate_id, pool_key) WHERE r.line > k.first)
        """).fetchall()[0][0]


def _pool_context(stage: Staging, line: int) -> set[int]:
    """`line` and the rows its checks compare it with: its prompt's, its candidate's and its (candidate, pool)'s first."""
    found = stage.con.execute(
        """SELECT min(earlier.line) FILTER (WHERE earlier.prompt_id = this.prompt_id),
                  min(earlier.line) FILTER (WHERE earlier.candidate_id = this.candidate_id),
                  min(earlier.line) FILTER (WHERE earlier.candidate_id = this.candidate_id
                                            AND earlier.pool_key = this.pool_key)
           FROM norm earlier, (SELECT * FROM norm WHERE line = ?) this WHERE earlier.line < ?""", [line, line]).fetchall()[0]
    return {line, *(f for f in found if f is not None)}


# ---------------------------------------------------------------- one row per record

def _stage_rows(stage: Staging, raw: RawTable, describe: Describe, fields: Sequence[Field],
                layers: Sequence[Mapping[str, str]], rules: Sequence[str], table: str, select: str) -> bool:
    """Check every row (one pass over `norm`, a view), then create staged `table` with `select` (another)."""
    normalise(stage, raw, fields, layers, "VIEW")
    if _is_empty(stage):
        return False
    first = first_line(stage, rules)
    if first is not None:
        refuse(stage, raw, describe, {first})
        return False
    staged.create(stage, table, select)
    return _done(stage)


def stage_votes(stage: Staging, raw: RawTable, describe: Describe, outcomes: Sequence[str]) -> bool:
    """Stage a votes table (tables._vote_records' rules)."""
    fields = [Field("candidate_id", ID, True), Field("outcome", ID, True), Field("pool", ID),
              Field("annotator", ID, True), Field("value", NUMBER, True)]
    return _stage_rows(stage, raw, describe, fields, [], [f"NOT list_contains({_known_list(outcomes)}, outcome)"],
                       "votes", f"SELECT line AS ord, line, {literal(str(raw.path))} AS file, candidate_id, outcome, "
                                f"coalesce(pool, {literal(DEFAULT_POOL)}) AS pool, annotator, value FROM norm")


def stage_calls(stage: Staging, raw: RawTable, describe: Describe) -> bool:
    """Stage a decisions table as `calls` (tables._call_records' rules: slot labels, defaults of the status)."""
    fields = [Field("slot_candidate_ids", ITEMS, True), Field("chosen_candidate_id", ID), Field("choice_label", ID),
              Field("raw_output", TEXT), Field("status", ID), Field("prompt_id", ID, True),
              Field("order_index", INTEGER, True, lo=0), Field("ranking", ITEMS), Field("parse_note", TEXT),
              Field("attempts", INTEGER, lo=1), Field("seconds", NUMBER), Field("label_probs", OBJECT)]
    label_ok = ("(choice_label IS NULL OR (length(choice_label) = 1 AND "
                "ascii(choice_label) BETWEEN 65 AND 64 + len(slot_candidate_ids)))")
    chosen = (f"CASE WHEN chosen_candidate_id IS NULL AND choice_label IS NOT NULL AND {label_ok} "
              "THEN slot_candidate_ids[ascii(choice_label) - 64] ELSE chosen_candidate_id END")
    label = ("CASE WHEN chosen_candidate_id IS NOT NULL AND choice_label IS NULL "
             "AND list_contains(slot_candidate_ids, chosen_candidate_id) "
             "THEN chr(CAST(64 + list_position(slot_candidate_ids, chosen_candidate_id) AS INTEGER)) ELSE choice_label END")
    status = _default_status("chosen IS NOT NULL")
    rules = ["NOT (len(slot_candidate_ids) BETWEEN 2 AND 26)", f"NOT {label_ok}",
             f"status IS NOT NULL AND NOT list_contains({_known_list(CALL_STATUSES)}, status)",
             f"list_contains({_known_list(CHOSEN)}, status_given) AND chosen IS NULL",
             f"label_probs IS NOT NULL AND NOT {_label_probs_ok('label_probs', 'len(slot_candidate_ids)')}"]
    return _stage_rows(stage, raw, describe, fields, [{"chosen": chosen, "label": label}, {"status_given": status}],
                       rules, "calls", "SELECT line AS ord, line, prompt_id, order_index, slot_candidate_ids, "
                                       "status_given AS status, label AS choice_label, chosen AS chosen_candidate_id, "
                                       "ranking, raw_output, parse_note, coalesce(attempts, 1) AS attempts, seconds, "
                                       "NULL AS input_json, label_probs FROM norm")


_JSON_SPACE = r"[ \t\n\r]*"
_PROBABILITY = rf'"[A-Z]"{_JSON_SPACE}:{_JSON_SPACE}(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?{_JSON_SPACE}'
# a JSON object of one-letter labels and unsigned numbers, spelled so that Python's json reads it alike
_PROBS_TEXT = rf"{_JSON_SPACE}\{{{_JSON_SPACE}(?:{_PROBABILITY}(?:,{_JSON_SPACE}{_PROBABILITY})*)?}}{_JSON_SPACE}"


def _label_probs_ok(text: str, slots: str) -> str:
    """SQL: the JSON text holds label probabilities that `values.label_probs` takes for a call of `slots` images:
    an object spelled plainly (_PROBS_TEXT), each key once and an offered label, each value in [0, 1], their sum
    within the tolerance (less a margin, so that a sum the SQL adds differently is left to the readers)."""
    text = f"CAST({text} AS VARCHAR)"  # a column the file lacks is an untyped NULL
    keys = f"json_keys({text})"
    probs = f"list_transform(json_extract({text}, '$.*'), lambda v: CAST(v AS DOUBLE))"
    return (f"(CASE WHEN regexp_full_match({text}, {literal(_PROBS_TEXT)}) THEN "  # only JSON reaches the json_*
            f"len({keys}) = len(list_distinct({keys})) "
            f"AND coalesce(list_bool_and(list_transform({keys}, lambda k: ascii(k) <= 64 + {slots})), true) "
            f"AND coalesce(list_bool_and(list_transform({probs}, lambda p: p BETWEEN 0 AND 1)), true) "
            f"AND coalesce(list_sum({probs}), 0) <= {1 + LABEL_PROBS_TOLERANCE - 1e-9!r} ELSE false END)")


def _default_status(answered: str) -> str:
    """SQL: the status a call's table gives, else 'ok' when it answered, 'parse_fail' when it left text,
    'runtime_fail' otherwise (tables._default_status)."""
    return (f"CASE WHEN status IS NOT NULL THEN status WHEN {answered} THEN 'ok' "
            "WHEN raw_output IS NOT NULL THEN 'parse_fail' ELSE 'runtime_fail' END")


def stage_scores(stage: Staging, raw: RawTable, describe: Describe) -> bool:
    """Stage a scores table (tables._score_records' rules)."""
    fields = [Field("candidate_id", ID, True), Field("score", NUMBER, True)]
    return _stage_rows(stage, raw, describe, fields, [], [], "scores",
                       "SELECT line AS ord, candidate_id, score FROM norm")


def stage_ratings(stage: Staging, raw: RawTable, describe: Describe, scale: tuple[int, int]) -> bool:
    """Stage a rating judge's table as `rating_calls` (tables._rating_records' rules)."""
    lo, hi = scale
    fields = [Field("rating", INTEGER, lo=lo, hi=hi), Field("raw_output", TEXT), Field("status", ID),
              Field("candidate_id", ID, True), Field("condition", ID), Field("parse_note", TEXT),
              Field("attempts", INTEGER, lo=1), Field("seconds", NUMBER)]
    return _stage_rows(stage, raw, describe, fields, [{"status_given": _default_status("rating IS NOT NULL")}], [],
                       "rating_calls", f"SELECT line AS ord, line, candidate_id, coalesce(condition, "
                                       f"{literal(DEFAULT_CONDITION)}) AS condition, status_given AS status, rating, "
                                       "raw_output, parse_note, coalesce(attempts, 1) AS attempts, seconds, "
                                       "NULL AS input_json FROM norm")


def register_taxonomy(stage: Staging, taxonomy: Taxonomy) -> None:
    """`answers_of(attribute, answer, kind)`: each attribute's labels ('label') and abstention ('abstain')."""
    rows = [(a.name, label, "label") for a in taxonomy.attributes for label in a.labels]
    rows += [(a.name, a.abstain, "abstain") for a in taxonomy.attributes]
    table = pa.table({"attribute": [r[0] for r in rows], "answer": [r[1] for r in rows], "kind": [r[2] for r in rows]},
                     schema=pa.schema([("attribute", pa.string()), ("answer", pa.string()), ("kind", pa.string())]))
    stage.con.register("taxonomy_rows", table)
    stage.con.execute("CREATE OR REPLACE TABLE answers_of AS SELECT * FROM taxonomy_rows")
    stage.con.unregister("taxonomy_rows")


def stage_gold_labels(stage: Staging, raw: RawTable, describe: Describe, taxonomy: Taxonomy) -> bool:
    """Stage a gold-labels table (tables._gold_records' rules: a taxonomy attribute, one of its answers)."""
    register_taxonomy(stage, taxonomy)
    fields = [Field("candidate_id", ID, True), Field("attribute", ID, True), Field("label", TEXT, True)]
    rules = ["attribute NOT IN (SELECT attribute FROM answers_of)",
             "NOT EXISTS (SELECT 1 FROM answers_of a WHERE a.attribute = norm.attribute AND a.answer = norm.label)"]
    return _stage_rows(stage, raw, describe, fields, [], rules, "gold_labels",
                       f"SELECT line AS ord, line, {literal(str(raw.path))} AS file, candidate_id, attribute, label "
                       "FROM norm")


def stage_answers(stage: Staging, raw: RawTable, describe: Describe, taxonomy: Taxonomy) -> bool:
    """Stage an attribute judge's table as `answers` (tables._answer_records' rules; `tables.answer_status`)."""
    register_taxonomy(stage, taxonomy)
    fields = [Field("candidate_id", ID, True), Field("attribute", ID, True), Field("label", TEXT),
              Field("rationale", TEXT), Field("condition", ID)]
    status = ("CASE WHEN label IS NULL THEN 'missing' WHEN EXISTS (SELECT 1 FROM answers_of a WHERE a.attribute = "
              "norm.attribute AND a.answer = norm.label AND a.kind = 'label') THEN 'ok' "
              "WHEN EXISTS (SELECT 1 FROM answers_of a WHERE a.attribute = norm.attribute AND a.answer = norm.label "
              "AND a.kind = 'abstain') THEN 'abstained' ELSE 'off_taxonomy' END")
    return _stage_rows(stage, raw, describe, fields, [], ["attribute NOT IN (SELECT attribute FROM answers_of)"],
                       "answers", f"SELECT ord, line, candidate_id, condition, attribute, status, "
                                  f"CASE WHEN status = 'ok' THEN label END AS label, label AS answer, rationale FROM "
                                  f"(SELECT line AS ord, line, candidate_id, coalesce(condition, "
                                  f"{literal(DEFAULT_CONDITION)}) AS condition, attribute, {status} AS status, label, "
                                  f"rationale FROM norm)")
