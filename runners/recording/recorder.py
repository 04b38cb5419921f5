"""The one recording path for every judge and scorer backend.

What every judge kind shares lives here: the dataset and history checks, the
run lifecycle (`open_run`, `run_lifecycle`), resume (`recorded_keys`,
`requests_to_call`), batch writes (`write_records`), the crash-safe loop
(`record_batches`) and a judge's run from planned requests to summary
(`record_planned`). The calls themselves (one identical retry, batches) are
an engine's (`runners.recording.engines`: this process's threads, or Ray replicas).
A kind brings its requests, its parser and its call table (selectors below;
raters in `runners.rating.rating_recorder`).

For a selector judge: check the dataset, pools and images, refuse to mix
request keys under one judge name, open a `runs` row, then for every
(prompt, order) not yet recorded build the request, call the backend (one
identical retry on a runtime exception; invalid text is never resampled),
parse, and commit the call. Backend calls run on an engine (a bounded thread
pool by default, in batches of `batch_size`); all writes happen on the calling
thread, which commits whatever has finished as soon as it is free (several
calls per commit when they finish together, a whole batch at once) and only
then waits for more, so a SIGKILL loses only calls still in flight.

Each run's `config_json` ends with "throughput": {"calls", "wall_seconds",
"calls_per_second"} over the calls it recorded, wall time from the first
call sent to the last commit (model loading excluded), and "execution": the
engine's settings (`Engine.settings`).

The store is reached through a `runners.recording.database.Database`: a connection the
caller holds (nothing is released), or a file opened per unit of work
(planning, opening the run, each batch, finishing the run) and released in
between, so another process, such as the app, can open it read-only and
follow progress in `calls` while the run goes on.

Resume: a call whose request key is already recorded is skipped, except a
`runtime_fail`, which is tried again and replaces the failed record.
"""

from __future__ import annotations

import contextlib
import json
import platform
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Protocol, TypeVar

import duckdb
import pandas as pd
import pyarrow as pa
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from audit_core import store
from audit_core.errors import InputError
from audit_core.ingest.pools import MIN_POOL_SIZE
from audit_core.selection.orders import presentation_orders, slot_labels
from audit_core.store.records import CallRecord, RunRecord, ScoreRecord
from audit_core.store.schema import RUN_RECORD_TABLES
from runners.backends.base import ScorerBackend, SelectorBackend
from runners.recording.database import Database, as_database
from runners.recording.engines import Engine, Generated, LocalEngine
from runners.selection.parsing import parse_output
from runners.selection.protocol import JudgeRequest, load_instruction, request_key

LIBRARIES: tuple[str, ...] = (
    "duckdb", "numpy", "pandas", "pillow", "requests", "torch", "torchvision",
    "transformers", "tokenizers", "open_clip_torch",
)


class Keyed(Protocol):
    """A request as the shared machinery sees it: identified by its key."""

    @property
    def request_key(self) -> str: ...


class Statused(Protocol):
    """A call record as the shared machinery sees it: it has a status."""

    @property
    def status(self) -> str: ...


Req = TypeVar("Req", bound=Keyed)
Rec = TypeVar("Rec", bound=Statused)


@dataclass(frozen=True)
class RunSummary:
    """What one invocation did.

    planned: calls (selector, rater) or candidates (scorer) in scope; skipped:
    already recorded before this invocation; recorded: written now; statuses:
    counts of the call statuses written now (scorers: {"scored": n}). run_id is
    None when there was nothing left to do (no run row is opened then).
    calls_per_second: calls (scorers: images) recorded now over the wall time of the run's calls.
    """

    run_id: str | None
    dataset: str
    judge: str
    kind: str
    planned: int
    skipped: int
    recorded: int
    statuses: dict[str, int] = field(default_factory=dict)
    status: str = "finished"
    seconds: float = 0.0
    calls_per_second: float | None = None

    def describe(self) -> str:
        """One line for the terminal."""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.statuses.items())) or "none"
        unit = "images" if self.kind == "scorer" else "calls"
        speed = f" ({self.calls_per_second:.3g} {unit}/s)" if self.calls_per_second else ""
        return (
            f"{self.kind} {self.judge!r} on {self.dataset!r}: {self.status}; {self.recorded} recorded now "
            f"({counts}), {self.skipped} already recorded, {self.planned} in scope, {self.seconds:.1f} s{speed}"
        )


@dataclass(frozen=True)
class RunIdentity:
    """What must stay the same for records to accumulate under one judge name."""

    dataset: str
    judge: str
    kind: str
    backend: str
    model: str
    instruction_sha256: str | None
    manifest_sha256: str


# ------------------------------------------------------------------ checks


def require_dataset(con: duckdb.DuckDBPyConnection, dataset: str) -> dict:
    """The datasets row, or an InputError listing the datasets that exist."""
    row = store.dataset_row(con, dataset)
    if row is None:
        known = [r[0] for r in con.execute("SELECT dataset_id FROM datasets ORDER BY 1").fetchall()]
        listing = ", ".join(known) if known else "none; build the demo or ingest one first"
        raise InputError(f"unknown dataset {dataset!r} (datasets in this database: {listing})", field="--dataset")
    return row


def check_images(candidates: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """(width, height) per candidate id; InputError naming the first missing or unreadable file."""
    sizes: dict[str, tuple[int, int]] = {}
    for cid, pid, path in zip(candidates["candidate_id"], candidates["prompt_id"], candidates["image_path"]):
        if not isinstance(path, str) or not path:
            raise InputError(f"candidate {cid!r} of prompt {pid!r} has no image file", field="image_path")
        try:
            with Image.open(path) as image:
                sizes[cid] = image.size
        except FileNotFoundError:
            raise InputError(f"image of candidate {cid!r} not found", file=path) from None
        except (OSError, UnidentifiedImageError) as err:
            raise InputError(f"cannot read image of candidate {cid!r}: {err}", file=path) from None
    return sizes


def check_history(con: duckdb.DuckDBPyConnection, identity: RunIdentity, *, replace: bool) -> None:
    """Refuse to record under a judge name whose earlier runs differ in what defines its keys.

    With `replace`, the judge's earlier runs on this dataset (and their records
    in every run table) are deleted instead. Differences checked: kind,
    backend, model, instruction hash and manifest hash.
    """
    records = " + ".join(f"(SELECT count(*) FROM {t} x WHERE x.run_id = r.run_id)" for t in RUN_RECORD_TABLES)
    runs = con.execute(
        f"""
        SELECT r.run_id, r.kind, r.backend, r.model, r.instruction_sha256, r.manifest_sha256,
               {records} AS n
        FROM runs r WHERE r.dataset_id = ? AND r.judge = ?
        """,
        [identity.dataset, identity.judge],
    ).df()
    if runs.empty:
        return
    if replace:
        with store.transaction(con):
            store.delete_judge(con, identity.dataset, identity.judge)
        return
    wanted = {
        "kind": identity.kind,
        "backend": identity.backend,
        "model": identity.model,
        "instruction_sha256": identity.instruction_sha256,
        "manifest_sha256": identity.manifest_sha256,
    }
    recorded = runs[runs["n"] > 0]
    for column, value in wanted.items():
        differing = recorded[recorded[column].map(lambda v: (None if pd.isna(v) else v) != value).astype(bool)]
        if differing.empty:
            continue
        before = differing[column].iloc[0]
        before = "none" if pd.isna(before) else str(before)
        n = int(differing["n"].sum())
        keys_note = (
            "so its request keys differ and nothing would resume"
            if column in ("instruction_sha256", "manifest_sha256")
            else "so new records would mix two different judges under one name"
        )
        raise InputError(
            f"judge {identity.judge!r} already has {n} records on dataset {identity.dataset!r} "
            f"with {column} {_short(before)} (this run: {_short(str(value))}), {keys_note}. "
            "Choose a new --judge name, or pass --replace to delete its earlier records.",
            field="--judge",
        )


def _short(value: str) -> str:
    return value[:12] + "…" if len(value) == 64 else repr(value)


# ------------------------------------------------------------------ run rows


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a run depends on (absent ones omitted)."""
    versions = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def open_run(
    con: duckdb.DuckDBPyConnection, identity: RunIdentity, *, model_revision: str | None, config: dict
) -> str:
    """Insert a `runs` row with status 'running'; returns its run id."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    run_id = f"{identity.dataset}:{identity.judge}:{stamp}:{uuid.uuid4().hex[:8]}"
    full_config = {"argv": sys.argv, **config, "libraries": library_versions()}  # a CLI's config may redact argv
    record = RunRecord(
        run_id=run_id,
        dataset_id=identity.dataset,
        judge=identity.judge,
        kind=identity.kind,
        backend=identity.backend,
        status="running",
        model=identity.model,
        model_revision=model_revision,
        instruction_sha256=identity.instruction_sha256,
        manifest_sha256=identity.manifest_sha256,
        config_json=json.dumps(full_config, sort_keys=True, default=str),
    )
    with store.transaction(con):
        # The recorder claims the judge name for the whole run (Database.claim), so
        # a run of this judge still marked 'running' belongs to a process that died.
        con.execute(
            "UPDATE runs SET status = 'interrupted' WHERE dataset_id = ? AND judge = ? AND status = 'running'",
            [identity.dataset, identity.judge],
        )
        store.insert_records(con, "runs", [record])
    return run_id


# ------------------------------------------------------------------ selectors


@dataclass(frozen=True)
class Scope:
    """What a selector run covers, as read from the store: the dataset's manifest hash, prompts and candidates."""

    dataset: str
    manifest_sha256: str
    prompts: pd.DataFrame
    candidates: pd.DataFrame


def load_scope(con: duckdb.DuckDBPyConnection, *, dataset: str, limit: int | None) -> Scope:
    """The prompts in scope (by id, first `limit`) and their candidates; InputError for an unknown dataset."""
    row = require_dataset(con, dataset)
    prompts = store.load_prompts(con, dataset)
    if limit is not None:
        prompts = prompts.head(limit)
    candidates = store.load_candidates(con, dataset)
    candidates = candidates[candidates["prompt_id"].isin(prompts["prompt_id"])]
    return Scope(dataset, row["manifest_sha256"], prompts, candidates)


def plan_requests(
    con: duckdb.DuckDBPyConnection,
    *,
    dataset: str,
    judge: str,
    orders: int,
    contract: str,
    limit: int | None,
    structured: bool = False,
) -> tuple[list[JudgeRequest], dict[str, tuple[int, int]], str, str]:
    """Every request in scope (prompts by id, first `limit`), image sizes, instruction and manifest hashes.

    Raises InputError for an unknown dataset, a pool smaller than `orders`, or a
    missing or unreadable image.
    """
    scope = load_scope(con, dataset=dataset, limit=limit)
    return plan_scope(scope, judge=judge, orders=orders, contract=contract, structured=structured)


def plan_scope(
    scope: Scope, *, judge: str, orders: int, contract: str, structured: bool = False
) -> tuple[list[JudgeRequest], dict[str, tuple[int, int]], str, str]:
    """`plan_requests` on a scope already read (no database needed: image checks can take a while).

    Raises InputError for a pool smaller than `orders` or a missing or unreadable image.
    """
    dataset, manifest, prompts, candidates = scope.dataset, scope.manifest_sha256, scope.prompts, scope.candidates
    instruction = load_instruction(contract, structured)  # structured output: its own hash, so its own keys
    if orders < 1:
        raise InputError(f"--orders must be at least 1, got {orders}", field="--orders")
    pools = candidates.groupby("prompt_id")["candidate_id"].apply(list).to_dict()
    single = sorted(pid for pid, ids in pools.items() if len(ids) < MIN_POOL_SIZE)
    if single:  # a dataset of single images, for rating or attribute judges (`audit_core.ingest.pools`)
        raise InputError(
            f"prompt {single[0]!r} has one candidate ({len(single)} such prompts): a selector judge needs at least "
            f"{MIN_POOL_SIZE} to choose from; this dataset is for rating and attribute judges",
            field="--dataset",
        )
    small = {pid: len(ids) for pid, ids in pools.items() if len(ids) < orders}
    if small:
        pid = min(small)
        raise InputError(
            f"prompt {pid!r} has {small[pid]} candidates, too few for {orders} distinct orders "
            f"({len(small)} such prompts); lower --orders to at most {min(small.values())}",
            field="--orders",
        )
    sizes = check_images(candidates)
    paths = dict(zip(candidates["candidate_id"], candidates["image_path"]))
    requests = []
    for pid, text in zip(prompts["prompt_id"], prompts["prompt"]):
        for order_index, slots in enumerate(presentation_orders(pools[pid], orders)):
            labels = tuple(slot_labels(len(slots)))
            before, after = instruction.render(text, labels)
            requests.append(
                JudgeRequest(
                    request_key=request_key(
                        dataset=dataset,
                        judge=judge,
                        prompt_id=pid,
                        order_index=order_index,
                        slot_candidate_ids=slots,
                        instruction_sha256=instruction.sha256,
                        manifest_sha256=manifest,
                    ),
                    dataset=dataset,
                    prompt_id=pid,
                    order_index=order_index,
                    prompt=text,
                    contract=contract,
                    labels=labels,
                    slot_candidate_ids=tuple(slots),
                    image_paths=tuple(paths[c] for c in slots),
                    text_before_images=before,
                    text_after_images=after,
                    structured=structured,
                )
            )
    return requests, sizes, instruction.sha256, manifest


def recorded_keys(con: duckdb.DuckDBPyConnection, dataset: str, judge: str, table: str = "calls") -> dict[str, str]:
    """request_key -> status of every record already in `table` (a call table) for this judge on this dataset."""
    rows = con.execute(
        f"SELECT c.request_key, c.status FROM {table} c JOIN runs r USING (run_id) "
        "WHERE r.dataset_id = ? AND r.judge = ?",
        [dataset, judge],
    ).fetchall()
    return dict(rows)


def requests_to_call(requests: Sequence[Req], done: Mapping[str, str]) -> tuple[list[Req], set[str]]:
    """(requests not yet recorded or recorded as runtime_fail, keys of those runtime failures to replace)."""
    todo = [r for r in requests if done.get(r.request_key, "runtime_fail") == "runtime_fail"]
    return todo, {r.request_key for r in todo if r.request_key in done}


def selector_record(
    request: JudgeRequest,
    generated: Generated,
    *,
    run_id: str,
    lenient: bool,
    input_json: str,
) -> CallRecord:
    """The call record of one answered request: parsed strictly (or leniently), or its runtime failure."""
    fields = dict(
        run_id=run_id,
        prompt_id=request.prompt_id,
        order_index=request.order_index,
        slot_candidate_ids=list(request.slot_candidate_ids),
        request_key=request.request_key,
        attempts=generated.attempts,
        seconds=generated.seconds,
        input_json=input_json,
    )
    if generated.raw is None:
        return CallRecord(status="runtime_fail", parse_note=generated.error, raw_output=generated.failed_output,
                          **fields)
    parsed = parse_output(generated.raw, request.labels, request.contract, lenient=lenient)
    chosen = request.slot_candidate_ids[request.labels.index(parsed.choice)] if parsed.choice else None
    return CallRecord(
        status=parsed.status,
        choice_label=parsed.choice,
        chosen_candidate_id=chosen,
        ranking=list(parsed.ranking) if parsed.ranking else None,
        raw_output=generated.raw,
        parse_note=parsed.note,
        **fields,
    )


def arrow_schema(table: str, types: Mapping[str, pa.DataType]) -> pa.Schema:
    """Arrow schema of `table`'s columns in store order: `types` where given, else string."""
    return pa.schema([(name, types.get(name, pa.string())) for name in store.TABLE_COLUMNS[table]])


def write_records(
    con: duckdb.DuckDBPyConnection, table: str, records: Sequence[object], retried: set[str], schema: pa.Schema
) -> None:
    """Commit a batch of call records to `table` in one transaction; earlier runtime failures of retried keys are replaced.

    Rows go in as one Arrow table: a per-row INSERT costs milliseconds in DuckDB,
    which would dominate the recording overhead.
    """
    replaced = [r.request_key for r in records if r.request_key in retried]
    batch = pa.table({name: [getattr(r, name) for r in records] for name in schema.names}, schema=schema)
    with store.transaction(con):
        if replaced:
            con.execute(f"DELETE FROM {table} WHERE list_contains(?, request_key)", [replaced])
        store.insert_frame(con, table, batch)


_CALL_ARROW_SCHEMA = arrow_schema("calls", {
    "slot_candidate_ids": pa.list_(pa.string()), "ranking": pa.list_(pa.string()),
    "order_index": pa.int32(), "attempts": pa.int32(), "seconds": pa.float64(), "created_at": pa.timestamp("us"),
})


def write_calls(con: duckdb.DuckDBPyConnection, calls: Sequence[CallRecord], retried: set[str]) -> None:
    """Commit a batch of selector calls (see `write_records`)."""
    write_records(con, "calls", calls, retried, _CALL_ARROW_SCHEMA)


def record_batches(
    db: Database,
    run_id: str,
    todo: Sequence[Req],
    engine: Engine[Req],
    build: Callable[[Req, Generated], Rec],
    write: Callable[[duckdb.DuckDBPyConnection, list[Rec]], None],
    *,
    bar: tqdm,
) -> Progress:
    """Have `engine` call every request, `build` each record and `write` each finished list at once.

    Writes happen on this thread, one `db` session per list, as soon as it is
    free; at the end the run is stamped 'finished', 'interrupted' or 'failed'
    with its throughput (`run_lifecycle`). Returns the counts of the statuses written and the throughput.
    """
    with run_lifecycle(db, run_id, bar) as progress:
        with contextlib.closing(engine.results(todo)) as finished:
            for answered in finished:
                batch = [build(request, generated) for request, generated in answered]
                with db.session() as con:
                    write(con, batch)
                for record in batch:
                    progress.statuses[record.status] = progress.statuses.get(record.status, 0) + 1
                bar.update(len(batch))
                bar.set_postfix(progress.statuses, refresh=False)
    return progress


def record_selector(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    judge: str,
    backend: SelectorBackend | None,
    backend_name: str,
    model: str,
    orders: int = 3,
    contract: str = "ranking",
    lenient: bool = False,
    structured: bool = False,
    limit: int | None = None,
    concurrency: int = 1,
    batch_size: int = 1,
    engine: Engine[JudgeRequest] | None = None,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Record a selector judge on `dataset`; see the module docstring for the guarantees.

    `db` is a held connection, a path (opened per unit of work and released in
    between) or a `Database`. Calls run on `engine`, by default this process's
    `concurrency` threads calling `backend` in batches of `batch_size`
    (`runners.recording.engines.LocalEngine`; backend None only with an engine).
    `config` (e.g. the CLI flags) is stored in the run's config_json with the
    library versions. Calls already recorded under the same request keys are
    skipped (resume). Raises InputError before any call for an unknown
    dataset, pools smaller than `orders`, missing or unreadable images, or a
    judge name already used with another instruction, manifest, backend or
    model (unless `replace`), and DatabaseBusy when another process records
    this judge or keeps the file locked; a KeyboardInterrupt is recorded (run
    status 'interrupted', finished calls kept) and re-raised.
    """
    engine = engine or local_engine(backend, concurrency=concurrency, batch_size=batch_size, name=f"judge-{judge}")
    started = time.perf_counter()
    db = as_database(db)
    with db.claim(dataset, judge):
        with db.session() as con:
            scope = load_scope(con, dataset=dataset, limit=limit)
        requests, sizes, instruction_sha, manifest = plan_scope(scope, judge=judge, orders=orders, contract=contract,
                                                                structured=structured)
        identity = RunIdentity(dataset, judge, "selector", backend_name, model, instruction_sha, manifest)
        run_config = {
            **(config or {}),
            "orders": orders, "contract": contract, "lenient": lenient, "structured": structured, "limit": limit,
            "concurrency": concurrency, "instruction_file": load_instruction(contract).file,
        }

        def build(run_id: str, request: JudgeRequest, generated: Generated) -> CallRecord:
            shown = {"image_sizes": [list(sizes[c]) for c in request.slot_candidate_ids],
                     "prompt_chars": len(request.prompt)}
            return selector_record(request, generated, run_id=run_id, lenient=lenient, input_json=json.dumps(shown))

        return record_planned(db, identity, requests, engine=engine, build=build, write=write_calls,
                              config=run_config, replace=replace, progress=progress, started=started)


def local_engine(backend: object | None, *, concurrency: int, batch_size: int, name: str) -> LocalEngine:
    """The default engine: `concurrency` threads calling `backend` in batches of `batch_size`;
    InputError for a count below 1."""
    for flag, value in (("--concurrency", concurrency), ("--batch-size", batch_size)):
        if value < 1:
            raise InputError(f"{flag} must be at least 1, got {value}", field=flag)
    if backend is None:
        raise ValueError("a backend or an engine is needed")
    return LocalEngine(backend, concurrency=concurrency, batch_size=batch_size, name=name)


def record_planned(
    db: Database,
    identity: RunIdentity,
    requests: Sequence[Req],
    *,
    engine: Engine[Req],
    build: Callable[[str, Req, Generated], Rec],
    write: Callable[[duckdb.DuckDBPyConnection, Sequence[Rec], set[str]], None],
    config: dict,
    replace: bool,
    progress: bool,
    started: float,
    check: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    table: str = "calls",
) -> RunSummary:
    """Record the planned requests of one judge that `table` does not hold yet (resume), as one run.

    Checks the judge's history (`check_history`, then `check`, e.g. a kind's own
    history check), opens the run (no run when nothing is left to do) with the
    engine's settings in its config, and has `record_batches` run the requests
    to do on `engine`, `build(run_id, request, generated)` each record and
    `write(con, batch, retried)` each finished batch. `started` is the
    perf_counter time the summary's seconds count from. Call inside `db.claim`.
    """
    dataset, judge, kind = identity.dataset, identity.judge, identity.kind
    with db.session() as con:
        check_history(con, identity, replace=replace)
        if check is not None:
            check(con)
        done = recorded_keys(con, dataset, judge, table)
    todo, retried = requests_to_call(requests, done)
    skipped = len(requests) - len(todo)
    if not todo:
        return RunSummary(None, dataset, judge, kind, len(requests), skipped, 0,
                          seconds=time.perf_counter() - started)
    revision = engine.model_revision()
    with db.session() as con:
        run_id = open_run(con, identity, model_revision=revision, config={**config, "execution": engine.settings()})
    bar = tqdm(total=len(requests), initial=skipped, unit="call", disable=not progress,
               desc=judge, dynamic_ncols=True)
    progress = record_batches(db, run_id, todo, engine, lambda request, generated: build(run_id, request, generated),
                              lambda con, batch: write(con, batch, retried), bar=bar)
    return RunSummary(run_id, dataset, judge, kind, len(requests), skipped, progress.recorded, progress.statuses,
                      "finished", time.perf_counter() - started, progress.throughput["calls_per_second"])


@dataclass
class Progress:
    """A run's calls so far: counts of the statuses written, and at its end its throughput
    {"calls", "wall_seconds", "calls_per_second"} (None for no measurable time)."""

    statuses: dict[str, int] = field(default_factory=dict)
    throughput: dict = field(default_factory=dict)

    @property
    def recorded(self) -> int:
        return sum(self.statuses.values())


@contextlib.contextmanager
def run_lifecycle(db: Database, run_id: str, bar: tqdm) -> Iterator[Progress]:
    """Around a run's calls: close the progress bar and stamp the run 'finished', 'interrupted' (Ctrl-C,
    re-raised) or 'failed' (any other exception, re-raised), with the throughput of the calls counted in
    the `Progress` it yields (wall time from entering the block to leaving it) added to its config_json."""
    status = "failed"
    progress = Progress()
    started = time.perf_counter()
    try:
        yield progress
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        bar.close()
        wall = time.perf_counter() - started
        progress.throughput = {"calls": progress.recorded, "wall_seconds": round(wall, 6),
                               "calls_per_second": round(progress.recorded / wall, 6) if wall > 0 else None}
        with db.session() as con, store.transaction(con):
            store.finish_run(con, run_id, status)
            (config,) = con.execute("SELECT config_json FROM runs WHERE run_id = ?", [run_id]).fetchone()
            config = {**json.loads(config or "{}"), "throughput": progress.throughput}
            con.execute("UPDATE runs SET config_json = ? WHERE run_id = ?",
                        [json.dumps(config, sort_keys=True, default=str), run_id])


# ------------------------------------------------------------------ scorers


def record_scorer(
    db: Database | duckdb.DuckDBPyConnection | str | Path,
    *,
    dataset: str,
    scorer: str,
    backend: ScorerBackend,
    backend_name: str,
    model: str,
    progress: bool = True,
    replace: bool = False,
    config: dict | None = None,
) -> RunSummary:
    """Score every candidate of `dataset`, one pool per backend call, committed per pool.

    `db` is taken as by `record_selector`. Candidates already scored under
    this scorer name are skipped. A pool whose scoring raises twice (one
    identical retry) stops the run with status 'failed'; pools scored before
    it are kept.
    """
    started = time.perf_counter()
    db = as_database(db)
    with db.claim(dataset, scorer):
        with db.session() as con:
            row = require_dataset(con, dataset)
            prompts = store.load_prompts(con, dataset)
            candidates = store.load_candidates(con, dataset)
        check_images(candidates)
        identity = RunIdentity(dataset, scorer, "scorer", backend_name, model, None, row["manifest_sha256"])
        with db.session() as con:
            check_history(con, identity, replace=replace)
            scored = {
                r[0]
                for r in con.execute(
                    "SELECT s.candidate_id FROM scores s JOIN runs r USING (run_id) "
                    "WHERE r.dataset_id = ? AND r.judge = ?",
                    [dataset, scorer],
                ).fetchall()
            }
        text = dict(zip(prompts["prompt_id"], prompts["prompt"]))
        pools = [(pid, group) for pid, group in candidates.groupby("prompt_id", sort=True)
                 if not set(group["candidate_id"]) <= scored]
        skipped = len(scored & set(candidates["candidate_id"]))
        if not pools:
            return RunSummary(None, dataset, scorer, "scorer", len(candidates), skipped, 0,
                              seconds=time.perf_counter() - started)
        revision = backend.model_revision()
        with db.session() as con:
            run_id = open_run(con, identity, model_revision=revision, config=dict(config or {}))
        written = 0
        bar = tqdm(total=len(candidates), initial=skipped, unit="image", disable=not progress,
                   desc=scorer, dynamic_ncols=True)
        with run_lifecycle(db, run_id, bar) as counted:
            for pid, group in pools:
                group = group.sort_values("canonical_index")
                todo = group[~group["candidate_id"].isin(scored)]
                values = _score_pool(backend, text[pid], list(todo["image_path"]), pid)
                with db.session() as con, store.transaction(con):
                    store.insert_records(con, "scores", [
                        ScoreRecord(run_id, cid, float(v)) for cid, v in zip(todo["candidate_id"], values)
                    ])
                written += len(todo)
                counted.statuses["scored"] = written
                bar.update(len(todo))
    return RunSummary(run_id, dataset, scorer, "scorer", len(candidates), skipped, written,
                      {"scored": written}, "finished", time.perf_counter() - started,
                      counted.throughput["calls_per_second"])


def _score_pool(backend: ScorerBackend, prompt: str, paths: list[str], prompt_id: str) -> list[float]:
    try:
        values = backend.score(prompt, paths)
    except Exception:  # one identical retry, as for selectors
        values = backend.score(prompt, paths)
    if len(values) != len(paths):
        raise RuntimeError(f"scorer returned {len(values)} scores for {len(paths)} images of prompt {prompt_id!r}")
    return list(values)
