"""SQL for one cell of a staged table file: whether it is present, whether the contract refuses it, its value.

A table file staged in DuckDB (`staging`) keeps each cell as the file gives it: text (CSV), a JSON
value (JSONL) or a value of the Parquet column's type. For each kind of field the readers know
(`values` and `tables`: an id, text, a number, an integer in a range, a list of ids) the functions
here give SQL that decides, for every row at once, what the Python readers decide for one cell:

- `present`: the cell holds a value (not an empty CSV cell, a JSON null or absent key, a Parquet
  null or NaN);
- `*_bad`: the reader refuses the cell (a wrong type, a blank id, a number that is not finite or
  not spelled `values.NUMBER_TEXT`, an integer out of range, a list holding a blank id);
- `*_value`: the clean value of a cell that is not bad (ids trimmed as `str.strip` trims).

The rules are the readers' own, written as SQL: `blank` and `strip` use the exact character sets of
`user_text.blank` and `str.isspace`, numbers the same regular expression. A cell whose type the SQL
cannot read exactly (a Parquet type the readers never accept, say) is marked bad, and the reader
then describes the row itself (`table_rules`). Column names reach SQL only after they are checked
to be identifiers of the contract (`identifier`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from audit_core.ingest.values import NUMBER_TEXT

# Parquet column types by how the readers see their values
STRING, INTEGER, FLOAT, STRING_LIST, OTHER_LIST, NULL, OTHER = (
    "string", "integer", "float", "string_list", "other_list", "null", "other")
TEXT_FORM, JSON_FORM = "text", "json"  # every cell of a CSV file is text; of a JSONL file, JSON


def _class(codes: list[int]) -> str:
    """A regular-expression character class body for the code points `codes`, as ranges."""
    parts, codes = [], sorted(codes)
    start = prev = codes[0]
    for code in [*codes[1:], None]:
        if code is not None and code == prev + 1:
            prev = code
            continue
        parts.append(f"\\x{{{start:x}}}" if start == prev else f"\\x{{{start:x}}}-\\x{{{prev:x}}}")
        if code is not None:
            start = prev = code
    return "".join(parts)


_ALL = range(0x110000)
SPACE_CHARS = "".join(chr(c) for c in _ALL if chr(c).isspace())  # what str.strip() removes
_SPACE = _class([ord(c) for c in SPACE_CHARS])
_INVISIBLE = _class([c for c in _ALL if chr(c).isspace() or unicodedata.category(chr(c)) in ("Cf", "Cc")])
SPACE_ONLY = f"[{_SPACE}]*"  # str.strip() leaves nothing
BLANK = f"[{_INVISIBLE}]*"  # user_text.blank
NUMBER = NUMBER_TEXT.pattern
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def identifier(name: str) -> str:
    """`name` quoted for SQL; ValueError unless it is an identifier (the contract's columns all are)."""
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a column of the contract: {name!r}")
    return f'"{name}"'


def literal(text: str) -> str:
    """A SQL string literal of a constant of ours (never user text: that goes in parameters)."""
    return "'" + text.replace("'", "''") + "'"


_SPACE_SQL, _BLANK_SQL, _NUMBER_SQL, _SPACES_SQL, _EDGE_SQL = (
    literal(x) for x in (SPACE_ONLY, BLANK, NUMBER, SPACE_CHARS, f"^[{_SPACE}]|[{_SPACE}]$"))


def blank(text_sql: str) -> str:
    """SQL: the text has no visible character (`user_text.blank`)."""
    return f"regexp_full_match({text_sql}, {_BLANK_SQL})"


def stripped(text_sql: str) -> str:
    """SQL: the text as `str.strip()` leaves it (DuckDB's trim with a set of characters is slow, so only
    text that begins or ends with one of them goes through it)."""
    return f"CASE WHEN regexp_matches({text_sql}, {_EDGE_SQL}) THEN trim({text_sql}, {_SPACES_SQL}) ELSE {text_sql} END"


def _filled(text_sql: str) -> str:
    """SQL: a CSV cell counts as given (`tables._csv_rows`: a cell that strips to nothing is absent)."""
    return (f"({text_sql} IS NOT NULL AND (ascii({text_sql}) BETWEEN 33 AND 126 "
            f"OR NOT regexp_full_match({text_sql}, {_SPACE_SQL})))")


def _number_text_ok(text_sql: str) -> str:
    """SQL: text spells a finite number in NUMBER_TEXT syntax, spaces and tabs around allowed."""
    inner = f"trim({text_sql}, ' \t')"
    return f"(regexp_full_match({inner}, {_NUMBER_SQL}) AND coalesce(isfinite(TRY_CAST({inner} AS DOUBLE)), false))"


def _number_text(text_sql: str) -> str:
    return f"TRY_CAST(trim({text_sql}, ' \t') AS DOUBLE)"


def _integral(double_sql: str, lo: int, hi: int) -> str:
    return f"({double_sql} = floor({double_sql}) AND {double_sql} BETWEEN {lo} AND {hi})"


def _split_ok(text_sql: str) -> str:
    """SQL: 'a|b|c' names no blank id."""
    return f"NOT coalesce(list_bool_or(list_transform(string_split({text_sql}, '|'), lambda x: {blank('x')})), false)"


def _split(text_sql: str) -> str:
    return f"list_transform(string_split({text_sql}, '|'), lambda x: {stripped('x')})"


def _plain_list(list_sql: str) -> str:
    """SQL: every element is printable ASCII without spaces (so none is blank or needs trimming); one test
    of the joined list, which is much quicker than one per element."""
    return (f"(list_count({list_sql}) = len({list_sql}) AND "
            f"regexp_full_match(array_to_string({list_sql}, chr(31)), '[!-~]+(?:\x1f[!-~]+)*'))")


@dataclass(frozen=True)
class Cell:
    """A staged column: its quoted name and form (TEXT_FORM, JSON_FORM or a Parquet type class)."""

    sql: str
    form: str

    @property
    def _type(self) -> str:
        return f"json_type({self.sql})"

    @property
    def _string(self) -> str:
        return f"({self.sql} ->> '$')"

    def present(self) -> str:
        """SQL: the cell holds a value."""
        if self.form == TEXT_FORM:
            return _filled(self.sql)
        if self.form == JSON_FORM:
            return f"({self.sql} IS NOT NULL AND {self._type} <> 'NULL')"
        if self.form == FLOAT:
            return f"({self.sql} IS NOT NULL AND NOT isnan({self.sql}))"
        return f"({self.sql} IS NOT NULL)"

    def _given(self, ok: str) -> str:
        """SQL: present but not `ok`."""
        return f"({self.present()} AND NOT coalesce({ok}, false))"

    # ids: text that is not blank (an integer counts as its digits), trimmed
    def id_bad(self) -> str:
        if self.form == TEXT_FORM or self.form == STRING:
            return self._given(f"NOT {blank(self.sql)}")
        if self.form == JSON_FORM:
            return self._given(f"{self._type} IN ('BIGINT', 'UBIGINT') "
                               f"OR ({self._type} = 'VARCHAR' AND NOT {blank(self._string)})")
        return self._given("false" if self.form != INTEGER else "true")

    def id_value(self) -> str:
        if self.form == TEXT_FORM or self.form == STRING:
            return f"CASE WHEN {self.present()} THEN {stripped(self.sql)} END"
        if self.form == JSON_FORM:
            return (f"CASE WHEN {self._type} = 'VARCHAR' THEN {stripped(self._string)} "
                    f"WHEN {self._type} IN ('BIGINT', 'UBIGINT') THEN {self._string} END")
        if self.form == INTEGER:
            return f"CAST({self.sql} AS VARCHAR)"
        return "CAST(NULL AS VARCHAR)"

    # text: a string as given
    def text_bad(self) -> str:
        if self.form == TEXT_FORM:
            return "false"
        if self.form == JSON_FORM:
            return self._given(f"{self._type} = 'VARCHAR'")
        return self._given("true" if self.form == STRING else "false")

    def text_value(self) -> str:
        if self.form == TEXT_FORM:
            return f"CASE WHEN {self.present()} THEN {self.sql} END"
        if self.form == JSON_FORM:
            return f"CASE WHEN {self._type} = 'VARCHAR' THEN {self._string} END"
        return self.sql if self.form == STRING else "CAST(NULL AS VARCHAR)"

    # numbers: finite, a JSON or Parquet number or text in NUMBER_TEXT syntax
    def number_bad(self) -> str:
        return self._given(self._number_ok())

    def _number_ok(self) -> str:
        if self.form in (TEXT_FORM, STRING):
            return _number_text_ok(self.sql)
        if self.form == JSON_FORM:
            return (f"CASE {self._type} WHEN 'VARCHAR' THEN {_number_text_ok(self._string)} "
                    f"WHEN 'BIGINT' THEN true WHEN 'UBIGINT' THEN true "
                    f"WHEN 'DOUBLE' THEN isfinite(TRY_CAST({self.sql} AS DOUBLE)) ELSE false END")
        if self.form == INTEGER:
            return "true"
        return f"isfinite({self.sql})" if self.form == FLOAT else "false"

    def number_value(self) -> str:
        if self.form in (TEXT_FORM, STRING):
            return f"CASE WHEN {self.present()} THEN {_number_text(self.sql)} END"
        if self.form == JSON_FORM:
            return (f"CASE {self._type} WHEN 'VARCHAR' THEN {_number_text(self._string)} "
                    f"WHEN 'NULL' THEN NULL ELSE TRY_CAST({self.sql} AS DOUBLE) END")
        if self.form in (INTEGER, FLOAT):
            return f"CASE WHEN {self.present()} THEN CAST({self.sql} AS DOUBLE) END"
        return "CAST(NULL AS DOUBLE)"

    # integers in [lo, hi]: an integer, a float with no fraction, or text spelling one
    def integer_bad(self, lo: int, hi: int) -> str:
        return self._given(self._integer_ok(lo, hi))

    def _integer_ok(self, lo: int, hi: int) -> str:
        if self.form in (TEXT_FORM, STRING):
            return f"({_number_text_ok(self.sql)} AND {_integral(_number_text(self.sql), lo, hi)})"
        if self.form == JSON_FORM:
            text = self._string
            exact = f"TRY_CAST({self.sql} AS HUGEINT)"
            double = f"TRY_CAST({self.sql} AS DOUBLE)"
            return (f"CASE {self._type} WHEN 'VARCHAR' THEN ({_number_text_ok(text)} AND "
                    f"{_integral(_number_text(text), lo, hi)}) "
                    f"WHEN 'BIGINT' THEN {exact} BETWEEN {lo} AND {hi} WHEN 'UBIGINT' THEN {exact} BETWEEN {lo} AND {hi} "
                    f"WHEN 'DOUBLE' THEN coalesce({_integral(double, lo, hi)}, false) ELSE false END")
        if self.form == INTEGER:
            return f"{self.sql} BETWEEN {lo} AND {hi}"
        return _integral(self.sql, lo, hi) if self.form == FLOAT else "false"

    def integer_value(self) -> str:
        number = self.number_value()
        return f"TRY_CAST({number if self.form != INTEGER else self.sql} AS BIGINT)"

    # a JSON object: an object (JSONL) or text holding one, whose JSON the value is (checked by the caller)
    def object_bad(self) -> str:
        if self.form in (TEXT_FORM, STRING):
            return "false"
        if self.form == JSON_FORM:
            return self._given(f"{self._type} IN ('OBJECT', 'VARCHAR')")
        return self._given("false")

    def object_value(self) -> str:
        if self.form == TEXT_FORM:
            return f"CASE WHEN {self.present()} THEN {self.sql} END"
        if self.form == JSON_FORM:
            return (f"CASE {self._type} WHEN 'OBJECT' THEN CAST({self.sql} AS VARCHAR) "
                    f"WHEN 'VARCHAR' THEN {self._string} END")
        return self.sql if self.form == STRING else "CAST(NULL AS VARCHAR)"

    # lists of ids: a list of strings none blank, or text 'a|b|c'
    def items_bad(self) -> str:
        if self.form in (TEXT_FORM, STRING):
            return self._given(_split_ok(self.sql))
        if self.form == JSON_FORM:
            element = blank("(e ->> '$')")
            each = f"list_transform(json_extract({self.sql}, '$[*]'), lambda e: json_type(e) = 'VARCHAR' AND NOT {element})"
            return self._given(f"CASE {self._type} WHEN 'VARCHAR' THEN {_split_ok(self._string)} "
                               f"WHEN 'ARRAY' THEN coalesce(list_bool_and({each}), true) ELSE false END")
        if self.form == STRING_LIST:
            each = f"list_transform({self.sql}, lambda e: e IS NOT NULL AND NOT {blank('e')})"
            return self._given(f"{_plain_list(self.sql)} OR coalesce(list_bool_and({each}), true)")
        if self.form == OTHER_LIST:
            return self._given(f"len({self.sql}) = 0")
        return self._given("false")

    def items_value(self) -> str:
        if self.form in (TEXT_FORM, STRING):
            return f"CASE WHEN {self.present()} THEN {_split(self.sql)} END"
        if self.form == JSON_FORM:
            return (f"CASE {self._type} WHEN 'VARCHAR' THEN {_split(self._string)} "
                    f"WHEN 'ARRAY' THEN list_transform(json_extract_string({self.sql}, '$[*]'), lambda x: {stripped('x')}) END")
        if self.form == STRING_LIST:
            return f"CASE WHEN {_plain_list(self.sql)} THEN {self.sql} ELSE list_transform({self.sql}, lambda x: {stripped('x')}) END"
        if self.form == OTHER_LIST:
            return f"CASE WHEN {self.sql} IS NOT NULL THEN CAST([] AS VARCHAR[]) END"
        return "CAST(NULL AS VARCHAR[])"


def parquet_form(duckdb_type: str) -> str:
    """How the readers see a Parquet column of this DuckDB type (STRING, INTEGER, FLOAT, …)."""
    kind = duckdb_type.upper()
    if kind == "VARCHAR":
        return STRING
    if kind in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                "UBIGINT", "UHUGEINT"):
        return INTEGER
    if kind in ("FLOAT", "DOUBLE"):
        return FLOAT
    if kind == "VARCHAR[]":
        return STRING_LIST
    if kind.endswith("[]"):
        return OTHER_LIST
    return NULL if kind == '"NULL"' or kind == "NULL" else OTHER
