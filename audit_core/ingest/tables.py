"""Reader for plain tables: pools/ratings, judge decisions and scores.

Formats by extension: `.csv` (header row, UTF-8), `.parquet`, `.jsonl` (one
object per line). The column contract is docs/table-contract.md; in short:

- pools, one row per (candidate, pool): prompt_id, prompt, candidate_id,
  alignment; optional country, category, split, source_model, image_path,
  stereotype, missing_explicit, missing_implicit, image_quality, overall,
  pool (default 'all'), n.
- decisions, one row per judge call: prompt_id, order_index,
  slot_candidate_ids ('a|b|c' in CSV, a list elsewhere), chosen_candidate_id
  and/or choice_label; optional status, ranking, raw_output, parse_note,
  attempts, seconds.
- scores, one row per candidate: candidate_id, score (or a JudgeActs-style
  `.json` file `{"scores": {candidate_id: score}}`).

Errors name the file, the line (CSV: physical line of the row's start; JSONL:
line; Parquet: row number from 1) and the column. Unknown columns are refused
so that a misspelt rating column cannot vanish silently. Empty CSV cells and
nulls mean "absent"; a rating is never imputed.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from audit_core.errors import InputError
from audit_core.ingest import judgeacts
from audit_core.ingest.pools import CHOSEN_STATUSES, ImportedRun, ImportedScores, PoolSet
from audit_core.orders import slot_labels
from audit_core.schema import CALL_STATUSES, OUTCOMES

LIST_SEPARATOR = "|"
PROMPT_COLUMNS: tuple[str, ...] = ("prompt", "country", "category", "split")
CANDIDATE_COLUMNS: tuple[str, ...] = ("prompt_id", "source_model", "image_path")
POOL_COLUMNS: frozenset[str] = frozenset(
    {"prompt_id", "candidate_id", "pool", "n", *PROMPT_COLUMNS, *CANDIDATE_COLUMNS, *OUTCOMES}
)
DECISION_COLUMNS: frozenset[str] = frozenset(
    {
        "prompt_id",
        "order_index",
        "slot_candidate_ids",
        "chosen_candidate_id",
        "choice_label",
        "status",
        "ranking",
        "raw_output",
        "parse_note",
        "attempts",
        "seconds",
    }
)
SCORE_COLUMNS: frozenset[str] = frozenset({"candidate_id", "score"})


def read_rows(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line or row number, {column: value}) with absent values as None."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        yield from _csv_rows(path)
    elif suffix == ".jsonl":
        yield from judgeacts.read_jsonl(path)
    elif suffix == ".parquet":
        yield from _parquet_rows(path)
    else:
        raise InputError(f"unsupported extension {suffix!r}; use .csv, .parquet or .jsonl", file=path)


def _csv_rows(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        handle = open(path, encoding="utf-8", newline="")
    except OSError as err:
        raise InputError(f"cannot read file ({err.strerror})", file=path) from err
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader, None)
            if not header:
                raise InputError("no header row", file=path, line=1)
            start = reader.line_num + 1
            for cells in reader:
                if any(cell.strip() for cell in cells):
                    if len(cells) != len(header):
                        raise InputError(
                            f"malformed row: {len(cells)} cells, the header has {len(header)}", file=path, line=start
                        )
                    yield start, {k: (v if v.strip() else None) for k, v in zip(header, cells)}
                start = reader.line_num + 1
        except (csv.Error, UnicodeDecodeError) as err:
            raise InputError(f"malformed CSV ({err})", file=path, line=reader.line_num) from err


def _parquet_rows(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise InputError(f"not a readable Parquet file ({err})", file=path) from err
    yield from enumerate(table.to_pylist(), start=1)


class _Row:
    """Typed access to one row's fields; every error names file, line and column."""

    def __init__(self, path: Path, line: int, values: dict, allowed: frozenset[str]) -> None:
        self.where = {"file": path, "line": line}
        unknown = sorted(set(values) - allowed)
        if unknown:
            raise InputError(f"unknown column; expected some of {', '.join(sorted(allowed))}", field=unknown[0], **self.where)
        self.values = values

    def fail(self, column: str, message: str) -> None:
        raise InputError(message, field=column, **self.where)

    def present(self, column: str) -> bool:
        value = self.values.get(column)
        return value is not None and not (isinstance(value, float) and math.isnan(value))

    def absent(self, column: str, required: bool) -> bool:
        """True when `column` is empty in this row; fails (InputError) if it is `required`."""
        if self.present(column):
            return False
        if required:
            self.fail(column, "missing")
        return True

    def text(self, column: str, *, required: bool = False, id_like: bool = False) -> str | None:
        if self.absent(column, required):
            return None
        value = self.values[column]
        if id_like and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            self.fail(column, f"expected text, got {value!r}")
        return value.strip() if id_like else value

    def number(self, column: str, *, required: bool = False) -> float | None:
        if self.absent(column, required):
            return None
        value = self.values[column]
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                self.fail(column, f"expected a number, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.fail(column, f"expected a finite number, got {value!r}")
        return float(value)

    def integer(self, column: str, *, minimum: int, required: bool = False) -> int | None:
        value = self.number(column, required=required)
        if value is None:
            return None
        if not value.is_integer() or value < minimum:
            self.fail(column, f"expected an integer ≥ {minimum}, got {self.values[column]!r}")
        return int(value)

    def items(self, column: str, *, required: bool = False) -> list[str] | None:
        if self.absent(column, required):
            return None
        value = self.values[column]
        if isinstance(value, str):
            value = value.split(LIST_SEPARATOR)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
            self.fail(column, f"expected a list of ids (or 'a{LIST_SEPARATOR}b{LIST_SEPARATOR}c'), got {value!r}")
        return [v.strip() for v in value]


def read_pools_table(path: str | Path, dataset_id: str) -> PoolSet:
    """Parse a long pools/ratings table into a PoolSet (no database access).

    Prompt-level columns must agree across a prompt's rows and candidate-level
    columns across a candidate's rows; (candidate_id, pool) is unique. A relative
    image_path is taken relative to the table's folder and must exist.
    """
    path = Path(path)
    prompts: dict[str, dict] = {}
    candidates: dict[str, dict] = {}
    ratings: list[dict] = []
    seen: dict[tuple[str, str], int] = {}
    for line, values in read_rows(path):
        row = _Row(path, line, values, POOL_COLUMNS)
        pid = row.text("prompt_id", required=True, id_like=True)
        cid = row.text("candidate_id", required=True, id_like=True)
        pool = row.text("pool", id_like=True) or "all"
        if (cid, pool) in seen:
            row.fail("candidate_id", f"duplicate row: candidate {cid!r} in pool {pool!r} already on line {seen[cid, pool]}")
        seen[cid, pool] = line
        prompt = {"prompt_id": pid, "line": line, **{c: row.text(c) for c in PROMPT_COLUMNS}}
        if prompt["prompt"] is None:
            row.fail("prompt", "missing")
        candidate = {
            "candidate_id": cid,
            "line": line,
            "prompt_id": pid,
            "source_model": row.text("source_model"),
            "image_path": _image_path(row, path.parent),
        }
        _agree(row, prompts, pid, prompt, PROMPT_COLUMNS, f"prompt {pid!r}")
        _agree(row, candidates, cid, candidate, CANDIDATE_COLUMNS, f"candidate {cid!r}")
        n = row.integer("n", minimum=1)
        for outcome in OUTCOMES:
            value = row.number(outcome, required=outcome == "alignment")
            if value is not None:
                ratings.append({"candidate_id": cid, "outcome": outcome, "pool": pool, "value": value, "n": n, "line": line})
    if not prompts:
        raise InputError("no pools found", file=path)
    return PoolSet(
        dataset_id=dataset_id,
        source=str(path),
        prompts=pd.DataFrame(list(prompts.values())),
        candidates=pd.DataFrame(list(candidates.values())),
        ratings=pd.DataFrame(ratings).astype({"n": "Int64"}),
    )


def _image_path(row: _Row, base: Path) -> str | None:
    text = row.text("image_path")
    if text is None:
        return None
    image = Path(text) if Path(text).is_absolute() else base / text
    if not image.is_file():
        row.fail("image_path", f"no such file: {image}")
    return str(image.resolve())


def _agree(row: _Row, seen: dict[str, dict], key: str, record: dict, columns: tuple[str, ...], what: str) -> None:
    """Keep the first record per key; later rows must repeat its values."""
    first = seen.setdefault(key, record)
    for column in columns:
        if first[column] != record[column]:
            row.fail(column, f"{what} has {first[column]!r} on line {first['line']} but {record[column]!r} here")


def read_decisions_table(path: str | Path, judge: str) -> ImportedRun:
    """Parse a judge-decisions table into an ImportedRun (no database access).

    choice_label and chosen_candidate_id determine each other through the slot
    order (slot k has label chr(ord('A') + k)); given both, they must agree.
    status defaults to 'ok' when a choice is given, else 'parse_fail' when
    raw_output is given, else 'runtime_fail'.
    """
    path = Path(path)
    calls = []
    for line, values in read_rows(path):
        row = _Row(path, line, values, DECISION_COLUMNS)
        slots = row.items("slot_candidate_ids", required=True)
        if not 2 <= len(slots) <= 26:
            row.fail("slot_candidate_ids", f"a call shows 2 to 26 images, got {len(slots)}")
        labels = slot_labels(len(slots))
        chosen = row.text("chosen_candidate_id", id_like=True)
        label = row.text("choice_label", id_like=True)
        if label is not None and label not in labels:
            row.fail("choice_label", f"{label!r} is not a slot label ({', '.join(labels)})")
        if chosen is None and label is not None:
            chosen = slots[labels.index(label)]
        elif chosen is not None and label is None and chosen in slots:
            label = labels[slots.index(chosen)]
        raw = row.text("raw_output")
        status = row.text("status", id_like=True)
        if status is None:
            status = "ok" if chosen is not None else "parse_fail" if raw is not None else "runtime_fail"
        elif status not in CALL_STATUSES:
            row.fail("status", f"{status!r} is not one of {', '.join(CALL_STATUSES)}")
        if status in CHOSEN_STATUSES and chosen is None:
            row.fail("chosen_candidate_id", f"status {status!r} needs chosen_candidate_id or choice_label")
        calls.append(
            {
                "line": line,
                "prompt_id": row.text("prompt_id", required=True, id_like=True),
                "order_index": row.integer("order_index", minimum=0, required=True),
                "slot_candidate_ids": slots,
                "status": status,
                "choice_label": label,
                "chosen_candidate_id": chosen,
                "ranking": row.items("ranking"),
                "raw_output": raw,
                "parse_note": row.text("parse_note"),
                "attempts": row.integer("attempts", minimum=1) or 1,
                "seconds": row.number("seconds"),
                "input_json": None,
            }
        )
    if not calls:
        raise InputError("no calls found", file=path)
    return ImportedRun(judge=judge, source_file=str(path), calls=pd.DataFrame(calls))


def read_scores_table(path: str | Path, scorer: str) -> ImportedScores:
    """Parse a per-candidate score table (or a JudgeActs-style `.json` scores file)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        return judgeacts.read_scores(path, scorer)
    rows = []
    for line, values in read_rows(path):
        row = _Row(path, line, values, SCORE_COLUMNS)
        rows.append(
            {"candidate_id": row.text("candidate_id", required=True, id_like=True), "score": row.number("score", required=True)}
        )
    return ImportedScores(scorer=scorer, source_file=str(path), scores=pd.DataFrame(rows, columns=["candidate_id", "score"]))
