"""Record an attribute judge: every image alone, under each condition, into `label_calls` and `label_answers`.

The crash-safe machinery is the selectors' (`runners.recording.recorder`): the judge name is claimed
for the run, the store is opened per unit of work, calls run on a bounded thread pool, in
batches of `batch_size` (`runners.recording.engines`), with one identical retry on a runtime
exception, and each finished batch (every call with its one answer row per attribute) is
committed in one transaction at once, so a SIGKILL loses only calls in flight. What is the
labeler's own: its requests (`runners.labels.protocol`), its parser (`runners.labels.parsing`)
and its two tables. A call that fails (parse or
runtime) still gets one answer per attribute, status 'missing'.

Resume: a call whose request key is recorded is skipped (a `runtime_fail` is tried again
and replaced, answers included). Keys hash the instruction, condition, taxonomy, model and
image, per condition, so each condition resumes on its own and a new condition joins an
existing judge. Records of an image and condition made with another taxonomy, instruction,
condition definition or model are refused (they would sit beside the new ones), as is a
judge whose kind, backend, model, instruction or dataset changed, unless `replace`; so is a
taxonomy other than the one the dataset's gold labels were checked against.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from audit_core import store
from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, Taxonomy, load_taxonomy
from audit_core.errors import InputError
from audit_core.store.records import LabelAnswerRecord, LabelCallRecord
from runners.labels.parsing import FieldAnswer, missing_answers, parse_labels
from runners.labels.protocol import (
    DEFAULT_CONDITION,
    DEFAULT_CONDITIONS,
    DEFAULT_INSTRUCTION,
    LabelBackend,
    LabelCondition,
    LabelInstruction,
    LabelRequest,
    label_request_key,
    load_label_instruction,
    select_label_conditions,
)
from runners.recording.condition_history import check_condition_keys
from runners.recording.engines import Generated
from runners.recording.recorder import (
    RunIdentity,
    RunSummary,
    arrow_schema,
    check_images,
    local_engine,
    record_planned,
    require_dataset,
)
from runners.recording.sessions import Database, as_database

KIND = "labeler"
TABLE = "label_calls"
ANSWER_TABLE = "label_answers"
# The fields of a call's input_json that its request key hashes; a recorded value that differs from the
# planned one says why an earlier record would not resume.
KEYED_FIELDS: tuple[str, ...] = ("model", "taxonomy_sha256", "instruction_sha256", "condition_sha256")


@dataclass(frozen=True)
class LabelScope:
    """What a labeler run covers: the images to label (first `limit` candidates in store order)."""

    dataset: str
    manifest_sha256: str
    images: pd.DataFrame  # prompt_id, candidate_id, image_path
    taxonomy: Taxonomy | None  # the one the dataset's gold labels were checked against, if any


def load_label_scope(con: duckdb.DuckDBPyConnection, *, dataset: str, limit: int | None) -> LabelScope:
    """Read the images and the dataset's taxonomy; InputError for an unknown dataset."""
    row = require_dataset(con, dataset)
    images = store.load_candidates(con, dataset)
    images = images if limit is None else images.head(limit)
    return LabelScope(dataset, row["manifest_sha256"], images, store.load_taxonomy(con, dataset))


def check_taxonomy(scope: LabelScope, taxonomy: Taxonomy) -> None:
    """InputError when the dataset's gold labels were checked against a taxonomy with other content."""
    stored = scope.taxonomy
    if stored is None or stored.to_json() == taxonomy.to_json():
        return
    raise InputError(
        f"dataset {scope.dataset!r} has gold labels of taxonomy {stored.name!r} {stored.version} "
        f"(sha256 {stored.sha256[:12]}…), and {taxonomy.source} ({taxonomy.name!r} {taxonomy.version}) differs "
        "from it, so the answers could not be scored against them; pass the taxonomy the labels were ingested with",
        field="--taxonomy",
    )


@dataclass(frozen=True)
class LabeledCall:
    """One call's record and its answers (one per attribute), written together."""

    call: LabelCallRecord
    answers: tuple[LabelAnswerRecord, ...]

    @property
    def status(self) -> str:
        return self.call.status

    @property
    def request_key(self) -> str:
        return self.call.request_key


def labeled_call(
    request: LabelRequest, generated: Generated, *, run_id: str, input_json: str, status: str,
    answers: Sequence[FieldAnswer], note: str | None,
) -> LabeledCall:
    """The call record (raw text kept; a runtime failure keeps what the backend received) and its answer rows."""
    raw = generated.raw if generated.raw is not None else generated.failed_output
    call = LabelCallRecord(run_id=run_id, candidate_id=request.candidate_id, condition=request.condition,
                           status=status, request_key=request.request_key, raw_output=raw, parse_note=note,
                           attempts=generated.attempts, seconds=generated.seconds, input_json=input_json)
    rows = tuple(LabelAnswerRecord(run_id, request.request_key, request.candidate_id, request.condition,
                                   a.attribute, a.status, a.label, a.answer, a.rationale) for a in answers)
    return LabeledCall(call, rows)


def label_record(request: LabelRequest, generated: Generated, *, run_id: str, input_json: str) -> LabeledCall:
    """The records of one answered label request: parsed strictly, or its runtime failure."""
    if generated.raw is None:
        return labeled_call(request, generated, run_id=run_id, input_json=input_json, status="runtime_fail",
                            answers=missing_answers(request.taxonomy), note=generated.error)
    parsed = parse_labels(generated.raw, request.taxonomy)
    return labeled_call(request, generated, run_id=run_id, input_json=input_json, status=parsed.status,
                        answers=parsed.answers, note=parsed.note)


_CALL_SCHEMA = arrow_schema(TABLE, {"attempts": pa.int32(), "seconds": pa.float64(), "created_at": pa.timestamp("us")})
_ANSWER_SCHEMA = arrow_schema(ANSWER_TABLE, {})


def _arrow_rows(records: Sequence[object], schema: pa.Schema) -> pa.Table:
    """`records` (dataclasses with the schema's fields) as one Arrow table, column by column."""
    rows = list(map(attrgetter(*schema.names), records))
    columns = zip(*rows) if rows else ([] for _ in schema.names)
    return pa.table(dict(zip(schema.names, map(list, columns))), schema=schema)


def write_label_calls(con: duckdb.DuckDBPyConnection, calls: Sequence[LabeledCall], retried: set[str]) -> None:
    """Commit a batch of calls with their answers in one transaction; earlier runtime failures of
    retried keys are replaced (call and answers)."""
    replaced = [c.request_key for c in calls if c.request_key in retried]
    answers = [a for c in calls for a in c.answers]
    call_rows = _arrow_rows([c.call for c in calls], _CALL_SCHEMA)
    answer_rows = _arrow_rows(answers, _ANSWER_SCHEMA)
    with store.transaction(con):
        if replaced:
            for table in (ANSWER_TABLE, TABLE):
                con.execute(f"DELETE FROM {table} WHERE list_contains(?, request_key)", [replaced])
        store.insert_frame(con, TABLE, call_rows)
        store.insert_frame(con, ANSWER_TABLE, answer_rows)


def check_label_history(
    con: duckdb.DuckDBPyConnection,
    dataset: str,
    judge: str,
    requests: Sequence[LabelRequest],
    keyed: Mapping[str, Mapping[str, object]],
) -> None:
    """Refuse records of a planned (image, condition) whose key differs from the planned one.

    `keyed` gives each condition's KEYED_FIELDS as planned; the message names those that
    differ from the records' input_json (e.g. the taxonomy changed).
    """

    def cause(name: str, mine: pd.DataFrame) -> str:
        before = [json.loads(text) if isinstance(text, str) else {} for text in mine["input_json"]]
        changed = [f for f in keyed[name] if any(b.get(f) != keyed[name][f] for b in before)]
        return f"its {', '.join(changed)} changed since" if changed else "what it shows changed since"

    check_condition_keys(con, TABLE, dataset, judge, requests, cause)


def plan_labels(
    scope: LabelScope,
    *,
    judge: str,
    model: str,
    instruction: LabelInstruction,
    taxonomy: Taxonomy,
    conditions: Sequence[LabelCondition],
) -> tuple[list[LabelRequest], dict[str, tuple[int, int]]]:
    """Every request in scope (condition by condition, images in store order) and each image's size.

    Raises InputError for a taxonomy other than the dataset's, or a missing or unreadable image.
    """
    check_taxonomy(scope, taxonomy)
    sizes = check_images(scope.images)
    requests = []
    for condition in conditions:
        # The text does not depend on the image: render it once per condition, then name each image in it.
        shown = instruction.render(taxonomy, condition, "")
        for cid, path in zip(scope.images["candidate_id"], scope.images["image_path"]):
            content = tuple((kind, cid if kind == "image" else value) for kind, value in shown)
            requests.append(LabelRequest(
                request_key=label_request_key(
                    dataset=scope.dataset, judge=judge, model=model, condition=condition.name, candidate_id=cid,
                    manifest_sha256=scope.manifest_sha256, instruction_sha256=instruction.sha256,
                    condition_sha256=condition.sha256, taxonomy_sha256=taxonomy.sha256, content=content,
                ),
                dataset=scope.dataset, candidate_id=cid, condition=condition.name, taxonomy=taxonomy,
                label_list=condition.label_list, abstention=condition.abstention, content=content, image_path=path,
            ))
    return requests, sizes


def taxonomy_config(taxonomy: Taxonomy) -> dict:
    """How a run's config_json names its taxonomy."""
    return {"taxonomy_file": taxonomy.source, "taxonomy": taxonomy.name, "taxonomy_version": taxonomy.version,
            "taxonomy_sha256": taxonomy.sha256, "attributes": list(taxonomy.names())}


def record_labeler(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    judge: str,
    backend: LabelBackend,
    backend_name: str,
    model: str,
    taxonomy_file: str | Path = DEFAULT_TAXONOMY,
    conditions: Sequence[str] = (DEFAULT_CONDITION,),
    conditions_file: str | Path = DEFAULT_CONDITIONS,
    instruction_file: str | Path = DEFAULT_INSTRUCTION,
    limit: int | None = None,
    concurrency: int = 1,
    batch_size: int = 1,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Label every image of `dataset` (the first `limit`) under each named condition; see the module docstring.

    `db` is a held connection, a path or a `Database`, as for
    `runners.selection.recorder.record_selector`. Raises InputError before any call for an unknown
    dataset or condition, a bad taxonomy, instruction or conditions file, a taxonomy other
    than the dataset's, a missing or unreadable image, or a judge or condition whose records
    were made differently (unless `replace`); DatabaseBusy when another process records this
    judge or holds the file. A KeyboardInterrupt is recorded (run 'interrupted', finished
    calls kept) and re-raised.
    """
    engine = local_engine(backend, concurrency=concurrency, batch_size=batch_size, name=f"labeler-{judge}")
    started = time.perf_counter()
    taxonomy = load_taxonomy(taxonomy_file)
    instruction = load_label_instruction(instruction_file)
    chosen = select_label_conditions(conditions_file, conditions)
    db = as_database(db)
    with db.claim(dataset, judge):
        with db.session() as con:
            scope = load_label_scope(con, dataset=dataset, limit=limit)
        requests, sizes = plan_labels(scope, judge=judge, model=model, instruction=instruction, taxonomy=taxonomy,
                                      conditions=chosen)
        identity = RunIdentity(dataset, judge, KIND, backend_name, model, instruction.sha256, scope.manifest_sha256)
        run_config = {
            **(config or {}), **taxonomy_config(taxonomy),
            "instruction_file": str(instruction.file), "conditions_file": str(conditions_file),
            "conditions": {c.name: {"sha256": c.sha256, "label_list": c.label_list, "abstention": c.abstention}
                           for c in chosen},
            "limit": limit, "concurrency": concurrency,
        }
        keyed = {c.name: {"model": model, "taxonomy_sha256": taxonomy.sha256, "instruction_sha256": instruction.sha256,
                          "condition_sha256": c.sha256} for c in chosen}
        flags = {c.name: {"label_list": c.label_list, "abstention": c.abstention} for c in chosen}

        def build(run_id: str, request: LabelRequest, generated: Generated) -> LabeledCall:
            shown = {**keyed[request.condition], **flags[request.condition],
                     "image_size": list(sizes[request.candidate_id])}
            return label_record(request, generated, run_id=run_id, input_json=json.dumps(shown))

        return record_planned(
            db, identity, requests, engine=engine, build=build, write=write_label_calls, config=run_config,
            replace=replace, progress=progress, started=started, table=TABLE,
            check=lambda con: check_label_history(con, dataset, judge, requests, keyed),
        )
