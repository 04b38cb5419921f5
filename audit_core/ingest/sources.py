"""Input files as UTF-8 text, JSON and Parquet rows, with errors naming file, line and field.

A byte-order mark at the start of a text file is accepted (Excel writes one).
Bytes that are not UTF-8 and lone surrogate escapes (`"\\ud800"`, valid JSON
but not text) are refused, naming the line and, where it can be told, the field
or column; so are a key repeated within one JSON object (JSON would keep only
the last) and JSON nested too deeply to read.

Undecodable bytes are decoded as lone surrogates (Python's surrogateescape), so
the parsers still see the structure and `text_problem` can point at the field
holding them. Every file is opened through `audit_core.ingest.input_files`: a regular
file of bounded size, or refused.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from audit_core.errors import InputError
from audit_core.ingest import input_files
from audit_core.user_text import excerpt

BOM = "\ufeff"
_SURROGATE = re.compile("[\ud800-\udfff]")
PARQUET_BATCH_ROWS = 256


def decoded(data: bytes) -> str:
    """UTF-8 text without a leading BOM; undecodable bytes become U+DC80–U+DCFF (see `text_problem`)."""
    text = data.decode("utf-8", "surrogateescape")
    return text[1:] if text.startswith(BOM) else text


def text_problem(value: str) -> str | None:
    """Why `value` is not storable text (an undecodable byte, a lone surrogate), or None."""
    found = _SURROGATE.search(value)
    if found is None:
        return None
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # how surrogateescape spells byte code − 0xDC00
        return f"not UTF-8 text (byte 0x{code - 0xDC00:02x} at character {found.start() + 1})"
    return f"not text (lone surrogate \\u{code:04x} at character {found.start() + 1})"


def json_text_problem(obj: object) -> tuple[str, str] | None:
    """(field path, problem) of the first key or string in a parsed JSON value that is not storable text."""
    stack: list[tuple[str, object]] = [("", obj)]
    while stack:  # iterative: a deeply nested value must not exhaust the recursion limit
        path, value = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value)
            if problem:
                return path or "(value)", problem
        elif isinstance(value, dict):
            for key in value:
                problem = text_problem(key)
                if problem:
                    return path or "(top level)", f"a key is {problem}"
            stack.extend(reversed([(f"{path}.{excerpt(key)}" if path else excerpt(key), child)
                                   for key, child in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{path}[{i}]", child) for i, child in enumerate(value)]))
    return None


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _RepeatedKey(key)
        obj[key] = value
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def parsed_json(text: str, position: int, where: dict) -> tuple[object, int]:
    """Decode the JSON value of `text` starting at `position`; returns it with its end.

    `where` names the file and the line `position` is on (None: count it within
    `text`); errors name the line of the problem itself.
    """
    first = where["line"] if where.get("line") is not None else text.count("\n", 0, position) + 1

    def line_of(pos: int) -> int:
        return first + text.count("\n", position, pos)

    try:
        obj, end = _DECODER.raw_decode(text, position)
    except json.JSONDecodeError as err:
        line_start = text.rfind("\n", 0, err.pos) + 1
        bad = _SURROGATE.search(text, line_start, err.pos + 1)
        if bad is not None:  # the syntax error is an undecodable byte outside any string
            problem = f"byte 0x{ord(bad.group()) - 0xDC00:02x} at column {bad.start() - line_start + 1} is not UTF-8"
            raise InputError(problem, file=where["file"], line=line_of(bad.start())) from err
        message = f"not valid JSON: {err.msg} (column {err.colno})"
        raise InputError(message, file=where["file"], line=line_of(err.pos)) from err
    except _RepeatedKey as err:
        raise InputError("key appears twice in one object", field=excerpt(err.key), file=where["file"], line=line_of(position)) from err
    except RecursionError as err:
        raise InputError("not readable JSON (nested too deeply)", file=where["file"], line=line_of(position)) from err
    except ValueError as err:  # an integer literal longer than Python converts (sys.get_int_max_str_digits)
        raise InputError("not readable JSON: a number has too many digits", file=where["file"], line=line_of(position)) from err
    found = json_text_problem(obj)
    if found:
        byte = _SURROGATE.search(text, position, end)
        raise InputError(found[1], field=found[0], file=where["file"], line=line_of(byte.start() if byte else position))
    return obj, end


def json_lines(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line of a JSONL file, read one line at a time
    (never the whole file in memory)."""
    path = Path(path)
    for number, data in enumerate(input_files.read_lines(path, input_files.TABLE), start=1):
        line = data.decode("utf-8", "surrogateescape").removesuffix("\n")
        if number == 1:
            line = line.removeprefix(BOM)
        if line.strip(" \t\r"):
            yield number, json_line(line, path, number)


def json_line(line: str, path: Path, number: int) -> dict:
    """The object one line of a JSONL file holds (`line` without its \\n); InputError naming the line."""
    where = {"file": path, "line": number}
    obj, end = parsed_json(line, 0, where)
    if line[end:].strip(" \t\r"):
        raise InputError(f"not valid JSON (extra data at column {end + 1})", **where)
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", **where)
    return obj


def json_document(path: str | Path) -> object:
    """The single JSON value a file holds."""
    path = Path(path)
    text = decoded(input_files.read_bytes(path, input_files.TABLE))
    obj, end = parsed_json(text, skip_space(text, 0), {"file": path, "line": None})
    if text[end:].strip(" \t\r\n"):
        raise InputError("unexpected text after the JSON value", file=path, line=text.count("\n", 0, end) + 1)
    return obj


def skip_space(text: str, position: int) -> int:
    """The first position at or after `position` that is not JSON whitespace."""
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def parquet_rows(
    path: str | Path, columns: Sequence[str] | None = None, kind: str = input_files.TABLE
) -> Iterator[tuple[int, dict]]:
    """Stream a Parquet file's rows as dicts (row numbers from 1), in batches.

    `columns` (when given) must all exist and are the only ones read. A string
    cell that is not UTF-8 is refused naming its row and column. The file is a
    regular file within the limit of its `kind` (`input_files`).
    """
    path = Path(path)
    with input_files.opened(path, kind) as source:
        yield from _parquet_rows(path, source, columns)


def _parquet_rows(path: Path, source: object, columns: Sequence[str] | None) -> Iterator[tuple[int, dict]]:
    try:
        handle = pq.ParquetFile(source)
        if columns is not None:
            missing = [c for c in columns if c not in handle.schema_arrow.names]
            if missing:
                raise InputError("missing column", file=path, field=excerpt(missing[0]))
        number = 0
        for batch in handle.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
            try:
                rows = batch.to_pylist()
            except UnicodeDecodeError as err:
                row, column = _undecodable_cell(batch)
                raise InputError("not UTF-8 text", file=path, line=number + row, field=excerpt(column)) from err
            for row in rows:
                number += 1
                yield number, row
    except MemoryError:  # pyarrow's included: the file may be fine, the process is out of memory
        raise
    except (OSError, pa.ArrowException) as err:
        raise InputError(f"not a readable Parquet file ({excerpt(str(err))})", file=path) from err


def parquet_cells(row: dict) -> dict:
    """A Parquet row's cells as the readers take them: a NaN is absent (pandas writes a missing float as NaN;
    in JSONL a NaN is a value, refused as not finite)."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


def _undecodable_cell(batch: pa.RecordBatch) -> tuple[int, str]:
    """(row from 1, column) of the first cell of `batch` whose text is not UTF-8."""
    for i in range(batch.num_rows):
        for name in batch.schema.names:
            try:
                batch.column(name)[i].as_py()
            except UnicodeDecodeError:
                return i + 1, name
    return 1, batch.schema.names[0]
