"""Reader for plain tables: pools/ratings, votes, judge decisions, scores and rating-judge ratings.

Formats by extension: `.csv` (header row, UTF-8), `.parquet`, `.jsonl` (one
object per line). The column contract is docs/table-contract.md; in short:

- pools, one row per (candidate, pool): prompt_id, prompt, candidate_id;
  optional country, category, split, source_model, image_path, a rating
  column per outcome (alignment, stereotype, missing_explicit,
  missing_implicit, image_quality, overall, rubric, declared ones), pool
  (default 'all'), n, and item attributes `item_<attribute>`.
- votes, one row per annotator's rating: candidate_id, outcome, annotator,
  value; optional pool (default 'all'). A (candidate, outcome, pool) with
  votes but no pools-table rating gets the mean of its votes as consensus.
- decisions, one row per judge call: prompt_id, order_index,
  slot_candidate_ids ('a|b|c' in CSV, a list elsewhere), chosen_candidate_id
  and/or choice_label; optional status, ranking, raw_output, parse_note,
  attempts, seconds, label_probs (a JSON object: offered label -> probability).
- scores, one row per candidate: candidate_id, score (or a JudgeActs-style
  `.json` file `{"scores": {candidate_id: score}}`).
- ratings of a rating judge, one row per (candidate, condition): candidate_id,
  rating (an integer on the rated outcome's scale) or none; optional
  condition (default 'default'), status, raw_output, parse_note, attempts, seconds.
- gold labels, one row per (candidate, attribute): candidate_id, attribute, label,
  where the label is one of the taxonomy's answers for that attribute.
- an attribute judge's answers, one row per (candidate, attribute[, condition]):
  candidate_id, attribute, label (absent: the field was missing); optional
  rationale, condition (default 'default'). A label off the taxonomy is kept as given.

Errors name the file, the line (CSV: physical line of the row's start; JSONL:
line; Parquet: row number from 1) and the column. Unknown columns are refused
so that a misspelt rating column cannot vanish silently; an outcome of the
user's own is a column declared with its scale (`scales`). Empty CSV cells and
nulls mean "absent"; a rating is never imputed.

Each reader leaves the file's rows, checked and typed, in a staging database (`staged`), from
which they are checked against one another (`staged_checks`) and written (`staged_writes`). A
file is read by DuckDB and checked in SQL (`staging.load_raw`, `table_rules`); the functions
`_*_records` below are the rules written for one row at a time. They read small files (and files
DuckDB cannot read), and they describe the row the SQL found first to be refused, so every error
is theirs, word for word.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import duckdb
import pandas as pd

from audit_core import user_text
from audit_core.attributes.taxonomy import Attribute, Taxonomy
from audit_core.errors import InputError
from audit_core.ingest import images, input_files, judgeacts, sources, staged, staging, table_rules, values
from audit_core.ingest.labelers import ImportedLabeler
from audit_core.ingest.pools import CHOSEN_STATUSES, ImportedRatings, ImportedRun, ImportedScores, PoolSet
from audit_core.ingest.staged import StagedPools, StagedRun
from audit_core.ingest.staging import RawTable, Staging, Workspace
from audit_core.selection.orders import slot_labels
from audit_core.store.schema import CALL_STATUSES, DEFAULT_POOL, INTEGER_MAX, OUTCOME_SCALES
from audit_core.user_text import excerpt, shown

LIST_SEPARATOR = "|"
DEFAULT_CONDITION = "default"
PROMPT_COLUMNS: tuple[str, ...] = ("prompt", "country", "category", "split")
CANDIDATE_COLUMNS: tuple[str, ...] = ("prompt_id", "source_model", "image_path")
POOL_COLUMNS: frozenset[str] = frozenset(
    {"prompt_id", "candidate_id", "pool", "n", *PROMPT_COLUMNS, *CANDIDATE_COLUMNS, *OUTCOME_SCALES}
)
# an item attribute for breakdowns (e.g. item_culture): ASCII letters, digits and underscores after the prefix
ATTRIBUTE_COLUMN = re.compile(r"item_([A-Za-z0-9_]+)")
VOTE_COLUMNS: frozenset[str] = frozenset({"candidate_id", "outcome", "pool", "annotator", "value"})
RATING_COLUMNS: frozenset[str] = frozenset(
    {"candidate_id", "condition", "rating", "status", "raw_output", "parse_note", "attempts", "seconds"}
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
        "label_probs",
    }
)
SCORE_COLUMNS: frozenset[str] = frozenset({"candidate_id", "score"})
GOLD_COLUMNS: frozenset[str] = frozenset({"candidate_id", "attribute", "label"})
LABELER_COLUMNS: frozenset[str] = frozenset({"candidate_id", "attribute", "label", "rationale", "condition"})


def read_rows(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line or row number, {column: value}) with absent values (a Parquet NaN too) as None."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        yield from _csv_rows(path)
    elif suffix == ".jsonl":
        yield from sources.json_lines(path)
    elif suffix == ".parquet":
        for number, row in sources.parquet_rows(path):
            yield number, sources.parquet_cells(row)
    else:
        input_files.existing(path, input_files.TABLE)  # a FIFO or a device is refused as such, not for its name
        raise InputError(f"unsupported extension {shown(suffix)}; use .csv, .parquet or .jsonl", file=path)


def _csv_rows(path: Path) -> Iterator[tuple[int, dict]]:
    text = sources.decoded(input_files.read_bytes(path, input_files.TABLE))
    dirty = sources.text_problem(text) is not None  # some cell holds bytes that are not UTF-8
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header:
            raise InputError("no header row", file=path, line=1)
        _check_header(path, header, dirty)
        start = reader.line_num + 1
        for cells in reader:
            if any(cell.strip() for cell in cells):
                if len(cells) != len(header):
                    raise InputError(
                        f"malformed row: {len(cells)} cells, the header has {len(header)}", file=path, line=start
                    )
                for name, cell in zip(header, cells):
                    problem = dirty and sources.text_problem(cell)
                    if problem:
                        raise InputError(problem, file=path, line=start, field=name)
                yield start, {k: (v if v.strip() else None) for k, v in zip(header, cells)}
            start = reader.line_num + 1
    except csv.Error as err:
        raise InputError(f"malformed CSV ({err})", file=path, line=reader.line_num) from err


def _check_header(path: Path, header: list[str], dirty: bool) -> None:
    """InputError naming the first header cell that is not UTF-8 or repeats another (in time linear in its width)."""
    for i, name in enumerate(header):
        problem = dirty and sources.text_problem(name)
        if problem:
            raise InputError(f"header cell {problem}", file=path, line=1, field=f"column {i + 1}")
    counts = Counter(header)
    if len(counts) < len(header):
        name = next(name for name in header if counts[name] > 1)
        raise InputError("column appears twice in the header", file=path, line=1, field=excerpt(name))


class _Row:
    """Typed access to one row's fields; every error names file, line and column."""

    def __init__(self, path: Path, line: int, cells: dict, allowed: frozenset[str], hint: str = "") -> None:
        self.where = {"file": path, "line": line}
        unknown = sorted(set(cells) - allowed)
        if unknown:
            raise InputError(
                f"unknown column; expected some of {', '.join(sorted(allowed))}{hint}", field=excerpt(unknown[0]),
                **self.where
            )
        self.cells = cells

    def fail(self, column: str, message: str) -> None:
        raise InputError(message, field=column, **self.where)

    def present(self, column: str) -> bool:
        return self.cells.get(column) is not None

    def absent(self, column: str, required: bool) -> bool:
        """True when `column` is empty in this row; fails (InputError) if it is `required`."""
        if self.present(column):
            return False
        if required:
            self.fail(column, "missing")
        return True

    def text(self, column: str, *, required: bool = False, id_like: bool = False) -> str | None:
        """Text as given; an `id_like` column also takes an integer, and is trimmed and never blank."""
        if self.absent(column, required):
            return None
        value = self.cells[column]
        if id_like:
            return values.identifier(value, column, self.where, integers=True).strip()
        return values.text(value, column, self.where)

    def number(self, column: str, *, required: bool = False) -> float | None:
        if self.absent(column, required):
            return None
        return values.number(self.cells[column], column, self.where, text=True)

    def integer(
        self, column: str, *, minimum: int, maximum: int = INTEGER_MAX, required: bool = False
    ) -> int | None:
        if self.absent(column, required):
            return None
        return values.integer(self.cells[column], column, self.where, minimum=minimum, maximum=maximum, text=True)

    def items(self, column: str, *, required: bool = False) -> list[str] | None:
        if self.absent(column, required):
            return None
        value = self.cells[column]
        if isinstance(value, str):
            value = value.split(LIST_SEPARATOR)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and not user_text.blank(v) for v in value):
            self.fail(column, f"expected a list of ids (or 'a{LIST_SEPARATOR}b{LIST_SEPARATOR}c'), got {shown(value)}")
        return [v.strip() for v in value]


def _stage_file(path: Path, known: Callable[[str], bool], fast: Callable[[Staging, RawTable], bool],
                slow: Callable[[Staging], None], workspace: Workspace | None, alias: str | None = None) -> Staging:
    """A staging database (in `workspace` as `alias`, else one of its own) holding `path`'s rows: read by
    DuckDB and checked by `fast` (table_rules), or, when the file is small or `fast` declines it, checked
    row by row and staged by `slow`."""
    stage = workspace.staging(alias) if workspace is not None else Staging(alias=alias or "staged_0")
    try:
        raw = staging.load_raw(stage, path, known)
        try:
            staged_fast = raw is not None and fast(stage, raw)
        except (duckdb.IOException, duckdb.OutOfMemoryException, MemoryError):
            raise  # a full disk, no memory: nothing to read instead
        except duckdb.Error:  # DuckDB could not read all of it (a damaged Parquet page, say): the readers say why
            staged_fast = False
        finally:
            if raw is not None:
                raw.close()
        if not staged_fast:
            staging.drop_work(stage)
            slow(stage)
        return stage
    except BaseException:
        stage.close()
        raise


def read_pools_table(
    path: str | Path,
    dataset_id: str,
    scales: Mapping[str, tuple[float, float]] | None = None,
    votes: str | Path | None = None,
    images_dir: str | Path | None = None,
    labels: str | Path | None = None,
    taxonomy: Taxonomy | None = None,
    workspace: Workspace | None = None,
) -> StagedPools:
    """Read a long pools/ratings table, and optionally a votes table and gold labels, into StagedPools.

    Prompt-level columns must agree across a prompt's rows and candidate-level
    columns (item attributes `item_<attribute>` too) across a candidate's rows;
    (candidate_id, pool) is unique. An image_path is relative to `images_dir`
    (default: the table's folder), stays inside it and names an image that decodes. `scales` declares
    outcomes beyond the built-in ones, each with its [lo, hi] (see
    `declared_scale`). With `votes`, each (candidate, outcome, pool) that has
    votes but no rating in the pools table gets their mean (`staged_checks.add_vote_consensus`);
    `labels` are gold labels of `taxonomy`'s attributes (`read_gold_labels_table`). Every file is
    staged in `workspace` (default: one of the pools' own).
    """
    path = Path(path)
    base = Path(images_dir) if images_dir is not None else path.parent
    scales = dict(scales or {})
    outcomes = (*OUTCOME_SCALES, *scales)
    allowed = POOL_COLUMNS | set(scales)

    def describe(rows: Iterable[tuple[int, dict]]) -> PoolSet:
        return _pool_records(path, rows, dataset_id, scales, base)

    def slow(stage: Staging) -> None:
        pools = describe(read_rows(path))
        for table in ("prompts", "candidates", "ratings", "attributes"):
            staged.stage_frame(stage, table, getattr(pools, table))

    stage = _stage_file(path, lambda c: c in allowed or bool(ATTRIBUTE_COLUMN.fullmatch(c)),
                        lambda stage, raw: table_rules.stage_pools(stage, raw, describe, outcomes, base), slow, workspace,
                        "pools")
    pools = StagedPools(stage, dataset_id, str(path), scales)
    try:
        read_votes = read_votes_table(votes, scales, stage.workspace) if votes is not None else None
        staged.add_votes(pools, read_votes)
        gold = read_gold_labels_table(labels, taxonomy, stage.workspace) if labels is not None else None
        staged.add_gold_labels(pools, gold, taxonomy)
    except BaseException:
        pools.close()
        raise
    return pools


def _pool_records(
    path: Path, rows: Iterable[tuple[int, dict]], dataset_id: str, scales: dict[str, tuple[float, float]], base: Path
) -> PoolSet:
    """The rows of a pools table checked one at a time (`read_pools_table`'s rules), as a PoolSet."""
    outcomes = (*OUTCOME_SCALES, *scales)
    allowed = POOL_COLUMNS | set(scales)
    prompts: dict[str, dict] = {}
    candidates: dict[str, dict] = {}
    ratings: list[dict] = []
    seen: dict[tuple[str, str], int] = {}
    for line, cells in rows:
        attribute_columns = tuple(sorted(c for c in cells if ATTRIBUTE_COLUMN.fullmatch(c)))
        row = _Row(path, line, cells, allowed | set(attribute_columns),
                   ", item_<attribute> (declare an outcome of your own with --outcome NAME=LO:HI)")
        pid = row.text("prompt_id", required=True, id_like=True)
        cid = row.text("candidate_id", required=True, id_like=True)
        pool = row.text("pool", id_like=True) or DEFAULT_POOL
        if (cid, pool) in seen:
            row.fail("candidate_id", f"duplicate row: candidate {shown(cid)} in pool {shown(pool)} already on line "
                                     f"{seen[cid, pool]}")
        seen[cid, pool] = line
        prompt = {"prompt_id": pid, "line": line, **{c: row.text(c) for c in PROMPT_COLUMNS}}
        if prompt["prompt"] is None:
            row.fail("prompt", "missing")
        candidate = {
            "candidate_id": cid,
            "line": line,
            "prompt_id": pid,
            "source_model": row.text("source_model"),
            "image_path": _image_path(row, base),
            **{c: _attribute(row, c) for c in attribute_columns},
        }
        _agree(row, prompts, pid, prompt, PROMPT_COLUMNS, f"prompt {shown(pid)}")
        first = candidates.get(cid, candidate)
        attributes_here = {c for c in (*first, *candidate) if ATTRIBUTE_COLUMN.fullmatch(c)}
        _agree(row, candidates, cid, candidate, (*CANDIDATE_COLUMNS, *sorted(attributes_here)), f"candidate {shown(cid)}")
        n = row.integer("n", minimum=1)
        for outcome in outcomes:
            value = row.number(outcome)
            if value is not None:
                ratings.append({"candidate_id": cid, "outcome": outcome, "pool": pool, "value": value, "n": n, "line": line})
    if not prompts:
        raise InputError("no pools found", file=path)
    attributes = [
        {"candidate_id": cid, "attribute": ATTRIBUTE_COLUMN.fullmatch(c).group(1), "value": value, "line": record["line"]}
        for cid, record in candidates.items()
        for c, value in record.items()
        if ATTRIBUTE_COLUMN.fullmatch(c) and value is not None
    ]
    return PoolSet(
        dataset_id=dataset_id,
        source=str(path),
        prompts=pd.DataFrame(list(prompts.values())),
        candidates=pd.DataFrame([{k: v for k, v in r.items() if not ATTRIBUTE_COLUMN.fullmatch(k)}
                                 for r in candidates.values()]),
        ratings=pd.DataFrame(ratings, columns=["candidate_id", "outcome", "pool", "value", "n", "line"]).astype(
            {"n": "Int64"}
        ),
        attributes=pd.DataFrame(attributes, columns=["candidate_id", "attribute", "value", "line"]),
        scales=scales,
    )


def _attribute(row: _Row, column: str) -> str | None:
    """An item attribute's value: text; blank counts as absent, as an empty CSV cell does."""
    value = row.text(column)
    return value if value is not None and value.strip() else None


def read_votes_table(path: str | Path, scales: Mapping[str, tuple[float, float]] | None = None,
                     workspace: Workspace | None = None) -> Staging:
    """Read a votes table into a staging database's `votes`: candidate_id, outcome, pool, annotator, value.

    The outcome must be a built-in one or declared in `scales`; `staged_checks` puts each value on
    its outcome's scale and each annotator once per (candidate, outcome, pool).
    """
    path = Path(path)
    known = _known_scales(scales)

    def describe(rows: Iterable[tuple[int, dict]]) -> pd.DataFrame:
        return _vote_records(path, rows, known)

    return _stage_file(path, VOTE_COLUMNS.__contains__,
                       lambda stage, raw: table_rules.stage_votes(stage, raw, describe, list(known)),
                       lambda stage: staged.stage_frame(stage, "votes", describe(read_rows(path))), workspace)


def _vote_records(path: Path, rows: Iterable[tuple[int, dict]], known: Mapping[str, tuple[float, float]]) -> pd.DataFrame:
    """The rows of a votes table checked one at a time (plus line, file and field for errors)."""
    out = []
    for line, cells in rows:
        row = _Row(path, line, cells, VOTE_COLUMNS)
        cid = row.text("candidate_id", required=True, id_like=True)
        outcome = row.text("outcome", required=True, id_like=True)
        if outcome not in known:
            row.fail("outcome", _no_scale(outcome, known))
        out.append(
            {
                "candidate_id": cid,
                "outcome": outcome,
                "pool": row.text("pool", id_like=True) or DEFAULT_POOL,
                "annotator": row.text("annotator", required=True, id_like=True),
                "value": row.number("value", required=True),
                "line": line,
                "file": str(path),
                "field": "value",
            }
        )
    if not out:
        raise InputError("no votes found", file=path)
    return pd.DataFrame(out)


def rating_scale(outcome: str, scales: Mapping[str, tuple[float, float]] | None = None) -> tuple[int, int]:
    """The integer scale lo..hi of a rating judge's `outcome` (built-in or declared); InputError if it has none."""
    known = _known_scales(scales)
    if outcome not in known:
        raise InputError(_no_scale(outcome, known), field="--rating-outcome")
    lo, hi = known[outcome]
    if not (float(lo).is_integer() and float(hi).is_integer()):
        raise InputError(f"outcome {shown(outcome)} is on [{lo:g}, {hi:g}]: a rating judge rates integers, so its "
                         "scale needs integer ends", field="--rating-outcome")
    return int(lo), int(hi)


def _known_scales(declared: Mapping[str, tuple[float, float]] | None) -> dict[str, tuple[float, float]]:
    """Every outcome with a scale: the declared ones and the built-in ones (whose scales are fixed)."""
    return {**dict(declared or {}), **OUTCOME_SCALES}


def _no_scale(outcome: str, known: Mapping[str, tuple[float, float]]) -> str:
    return f"outcome {shown(outcome)} has no scale: use one of {', '.join(sorted(known))} or declare yours with --outcome NAME=LO:HI"


def declared_scale(text: str) -> tuple[str, tuple[float, float]]:
    """Parse NAME=LO:HI, an outcome column of the user's own and its scale; ValueError says what is wrong."""
    name, sep, bounds = text.partition("=")
    lo_text, colon, hi_text = bounds.partition(":")
    lo, hi = values.parsed_number(lo_text), values.parsed_number(hi_text)
    if not sep or not colon or lo is None or hi is None or not lo < hi:
        raise ValueError(f"expected NAME=LO:HI with numbers LO < HI, got {shown(text)}")
    if not name.isidentifier() or not name.isascii():
        raise ValueError(f"outcome name {shown(name)} must be letters, digits and underscores")
    if name in POOL_COLUMNS:
        raise ValueError(f"{shown(name)} is a column of the contract already; built-in outcomes have fixed scales")
    return name, (lo, hi)


def _image_path(row: _Row, base: Path) -> str | None:
    text = row.text("image_path")
    if text is None:
        return None
    image = images.confined_path(text, base, "image_path", row.where)
    if not images.existing_file(image, "image_path", row.where):
        row.fail("image_path", f"no such file: {image}")
    images.decoded_format(image, "image_path", row.where)
    return str(image)


def _agree(row: _Row, seen: dict[str, dict], key: str, record: dict, columns: tuple[str, ...], what: str) -> None:
    """Keep the first record per key; later rows must repeat its values (a column a row lacks is absent)."""
    first = seen.setdefault(key, record)
    for column in columns:
        if first.get(column) != record.get(column):
            row.fail(column, f"{what} has {shown(first.get(column))} on line {first['line']} but "
                             f"{shown(record.get(column))} here")


def read_decisions_table(path: str | Path, judge: str, workspace: Workspace | None = None) -> StagedRun:
    """Read a judge-decisions table into staged `calls` (no database access).

    choice_label and chosen_candidate_id determine each other through the slot
    order (slot k has label chr(ord('A') + k)); given both, they must agree.
    status defaults to 'ok' when a choice is given, else 'parse_fail' when
    raw_output is given, else 'runtime_fail'.
    """
    path = Path(path)

    def describe(rows: Iterable[tuple[int, dict]]) -> ImportedRun:
        return _call_records(path, rows, judge)

    stage = _stage_file(path, DECISION_COLUMNS.__contains__,
                        lambda stage, raw: table_rules.stage_calls(stage, raw, describe),
                        lambda stage: staged.stage_frame(stage, "calls", describe(read_rows(path)).calls), workspace)
    return StagedRun(stage, "calls", judge, str(path))


def _call_records(path: Path, rows: Iterable[tuple[int, dict]], judge: str) -> ImportedRun:
    """The rows of a decisions table checked one at a time, as an ImportedRun."""
    calls = []
    for line, cells in rows:
        row = _Row(path, line, cells, DECISION_COLUMNS)
        slots = row.items("slot_candidate_ids", required=True)
        if not 2 <= len(slots) <= 26:
            row.fail("slot_candidate_ids", f"a call shows 2 to 26 images, got {len(slots)}")
        labels = slot_labels(len(slots))
        chosen = row.text("chosen_candidate_id", id_like=True)
        label = row.text("choice_label", id_like=True)
        if label is not None and label not in labels:
            row.fail("choice_label", f"{shown(label)} is not a slot label ({', '.join(labels)})")
        if chosen is None and label is not None:
            chosen = slots[labels.index(label)]
        elif chosen is not None and label is None and chosen in slots:
            label = labels[slots.index(chosen)]
        raw = row.text("raw_output")
        status = row.text("status", id_like=True)
        if status is None:
            status = _default_status(chosen is not None, raw)
        elif status not in CALL_STATUSES:
            row.fail("status", f"{shown(status)} is not one of {', '.join(CALL_STATUSES)}")
        if status in CHOSEN_STATUSES and chosen is None:
            row.fail("chosen_candidate_id", f"status {shown(status)} needs chosen_candidate_id or choice_label")
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
                "label_probs": values.label_probs(cells.get("label_probs"), labels, "label_probs", row.where),
            }
        )
    if not calls:
        raise InputError("no calls found", file=path)
    return ImportedRun(judge=judge, source_file=str(path), calls=pd.DataFrame(calls))


def _default_status(answered: bool, raw_output: str | None) -> str:
    """A recorded call's status when its table gives none: 'ok' when it answered, else
    'parse_fail' when it left text, else 'runtime_fail' (an abstention is never guessed)."""
    return "ok" if answered else "parse_fail" if raw_output is not None else "runtime_fail"


def read_scores_table(path: str | Path, scorer: str, workspace: Workspace | None = None) -> StagedRun:
    """Read a per-candidate score table (or a JudgeActs-style `.json` scores file) into staged `scores`."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        stage = workspace.staging() if workspace is not None else Staging()
        try:
            staged.stage_frame(stage, "scores", judgeacts.read_scores(path, scorer).scores)
        except BaseException:
            stage.close()
            raise
        return StagedRun(stage, "scores", scorer, str(path))

    def describe(rows: Iterable[tuple[int, dict]]) -> ImportedScores:
        return _score_records(path, rows, scorer)

    stage = _stage_file(path, SCORE_COLUMNS.__contains__,
                        lambda stage, raw: table_rules.stage_scores(stage, raw, describe),
                        lambda stage: staged.stage_frame(stage, "scores", describe(read_rows(path)).scores), workspace)
    return StagedRun(stage, "scores", scorer, str(path))


def _score_records(path: Path, rows: Iterable[tuple[int, dict]], scorer: str) -> ImportedScores:
    """The rows of a scores table checked one at a time."""
    out = []
    for line, cells in rows:
        row = _Row(path, line, cells, SCORE_COLUMNS)
        out.append(
            {"candidate_id": row.text("candidate_id", required=True, id_like=True), "score": row.number("score", required=True)}
        )
    return ImportedScores(scorer=scorer, source_file=str(path), scores=pd.DataFrame(out, columns=["candidate_id", "score"]))


def read_ratings_table(
    path: str | Path, judge: str, outcome: str = "rubric", scale: tuple[int, int] = (1, 5),
    workspace: Workspace | None = None,
) -> StagedRun:
    """Read a rating judge's recorded ratings into staged `rating_calls` (no database access).

    rating is an integer on `scale` (lo..hi) or absent; status defaults to 'ok'
    when a rating is given, else 'parse_fail' when raw_output is given, else
    'runtime_fail' ('abstained' must be explicit). `staged_checks` holds
    the rest of the contract ('ok' needs a rating, every other status forbids one).
    """
    path = Path(path)

    def describe(rows: Iterable[tuple[int, dict]]) -> ImportedRatings:
        return _rating_records(path, rows, judge, outcome, scale)

    stage = _stage_file(path, RATING_COLUMNS.__contains__,
                        lambda stage, raw: table_rules.stage_ratings(stage, raw, describe, scale),
                        lambda stage: staged.stage_frame(stage, "rating_calls", describe(read_rows(path)).calls),
                        workspace)
    return StagedRun(stage, "rating_calls", judge, str(path), outcome=outcome, scale=scale)


def _rating_records(
    path: Path, rows: Iterable[tuple[int, dict]], judge: str, outcome: str, scale: tuple[int, int]
) -> ImportedRatings:
    """The rows of a rating judge's table checked one at a time, as ImportedRatings."""
    lo, hi = scale
    calls = []
    for line, cells in rows:
        row = _Row(path, line, cells, RATING_COLUMNS)
        rating = row.integer("rating", minimum=lo, maximum=hi)
        raw = row.text("raw_output")
        status = row.text("status", id_like=True)
        if status is None:  # an abstention is never guessed: 'abstained' must be written out
            status = _default_status(rating is not None, raw)
        calls.append(
            {
                "line": line,
                "candidate_id": row.text("candidate_id", required=True, id_like=True),
                "condition": row.text("condition", id_like=True) or DEFAULT_CONDITION,
                "status": status,
                "rating": None if rating is None else float(rating),
                "raw_output": raw,
                "parse_note": row.text("parse_note"),
                "attempts": row.integer("attempts", minimum=1) or 1,
                "seconds": row.number("seconds"),
                "input_json": None,
            }
        )
    if not calls:
        raise InputError("no ratings found", file=path)
    return ImportedRatings(judge=judge, source_file=str(path), calls=pd.DataFrame(calls), outcome=outcome, scale=scale)


def _taxonomy_attribute(row: _Row, taxonomy: Taxonomy) -> Attribute:
    """The row's `attribute`, which must be one of the taxonomy's."""
    name = row.text("attribute", required=True, id_like=True)
    if name not in taxonomy.names():
        row.fail("attribute", f"{shown(name)} is not an attribute of taxonomy {shown(taxonomy.name)} "
                              f"({excerpt(', '.join(taxonomy.names()))})")
    return taxonomy.attribute(name)


def read_gold_labels_table(path: str | Path, taxonomy: Taxonomy, workspace: Workspace | None = None) -> Staging:
    """Read a gold-labels table into a staging database's `gold_labels`: candidate_id, attribute, label.

    Every label is one of its attribute's answers in `taxonomy` (its labels or its abstention
    label), exactly as written; `staged_checks` puts each on a known candidate, once per attribute.
    """
    path = Path(path)

    def describe(rows: Iterable[tuple[int, dict]]) -> pd.DataFrame:
        return _gold_records(path, rows, taxonomy)

    return _stage_file(path, GOLD_COLUMNS.__contains__,
                       lambda stage, raw: table_rules.stage_gold_labels(stage, raw, describe, taxonomy),
                       lambda stage: staged.stage_frame(stage, "gold_labels", describe(read_rows(path))), workspace)


def _gold_records(path: Path, rows: Iterable[tuple[int, dict]], taxonomy: Taxonomy) -> pd.DataFrame:
    """The rows of a gold-labels table checked one at a time (plus line and file for errors)."""
    out = []
    for line, cells in rows:
        row = _Row(path, line, cells, GOLD_COLUMNS)
        cid = row.text("candidate_id", required=True, id_like=True)
        attribute = _taxonomy_attribute(row, taxonomy)
        label = row.text("label", required=True)
        if label not in attribute.answers():
            row.fail("label", f"{shown(label)} is not a label of {shown(attribute.name)} in taxonomy "
                              f"{shown(taxonomy.name)} ({excerpt(', '.join(attribute.answers()))})")
        out.append({"candidate_id": cid, "attribute": attribute.name, "label": label, "line": line, "file": str(path)})
    if not out:
        raise InputError("no gold labels found", file=path)
    return pd.DataFrame(out)


def answer_status(attribute: Attribute, value: str | None) -> tuple[str, str | None]:
    """(status, label) of one recorded answer: ('ok', value) for one of the labels, ('abstained', None)
    for the abstention label, ('missing', None) for no value, ('off_taxonomy', None) for anything else
    (never matched to a near label: case and spacing count)."""
    if value is None:
        return "missing", None
    if value in attribute.labels:
        return "ok", value
    return ("abstained", None) if value == attribute.abstain else ("off_taxonomy", None)


def read_labeler_table(path: str | Path, judge: str, taxonomy: Taxonomy, workspace: Workspace | None = None) -> StagedRun:
    """Read an attribute judge's recorded answers into staged `answers` (no database access).

    Each row answers one attribute of `taxonomy` for one image under one condition (default
    'default'); its status follows `answer_status`, the value as given kept in `answer`.
    """
    path = Path(path)

    def describe(rows: Iterable[tuple[int, dict]]) -> ImportedLabeler:
        return _answer_records(path, rows, judge, taxonomy)

    stage = _stage_file(path, LABELER_COLUMNS.__contains__,
                        lambda stage, raw: table_rules.stage_answers(stage, raw, describe, taxonomy),
                        lambda stage: staged.stage_frame(stage, "answers", describe(read_rows(path)).answers),
                        workspace)
    return StagedRun(stage, "answers", judge, str(path), taxonomy=taxonomy)


def _answer_records(path: Path, rows: Iterable[tuple[int, dict]], judge: str, taxonomy: Taxonomy) -> ImportedLabeler:
    """The rows of an attribute judge's table checked one at a time, as an ImportedLabeler."""
    out = []
    for line, cells in rows:
        row = _Row(path, line, cells, LABELER_COLUMNS)
        cid = row.text("candidate_id", required=True, id_like=True)
        attribute = _taxonomy_attribute(row, taxonomy)
        answer = row.text("label")
        status, label = answer_status(attribute, answer)
        out.append({"candidate_id": cid, "condition": row.text("condition", id_like=True) or DEFAULT_CONDITION,
                    "attribute": attribute.name, "status": status, "label": label, "answer": answer,
                    "rationale": row.text("rationale"), "line": line})
    if not out:
        raise InputError("no answers found", file=path)
    return ImportedLabeler(judge=judge, source_file=str(path), answers=pd.DataFrame(out), taxonomy=taxonomy)
