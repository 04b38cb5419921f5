"""The recording machinery every judge kind shares.

The dataset and history checks, the run lifecycle (`open_run`, `run_lifecycle`), resume
(`recorded_keys`, `requests_to_call`), batch writes (`write_records`), the crash-safe loop
(`record_batches`) and a judge's run from planned requests to summary (`record_planned`).
The calls themselves (one identical retry, batches) are an engine's
(`runners.recording.engines`: this process's threads, or Ray replicas). A kind brings its
requests, its parser and its call table: selectors in `runners.selection.recorder`, raters in
`runners.rating.recorder`, attribute judges in `runners.labels.recorder`; scorers are
`runners.recording.scorer`.

Backend calls run on an engine (a bounded thread pool by default, in batches of
`batch_size`); all writes happen on the calling thread, which commits whatever has finished as
soon as it is free (several calls per commit when they finish together, a whole batch at once)
and only then waits for more, so a SIGKILL loses only calls still in flight.

Each run's `config_json` ends with "throughput": {"calls", "wall_seconds",
"calls_per_second"} over the calls it recorded, wall time from the first
call sent to the last commit (model loading excluded), and "execution": the
engine's settings (`Engine.settings`).

The store is reached through a `runners.recording.sessions.Database`: a connection the
caller holds (nothing is released), or a file opened per unit of work
(planning, opening the run, each batch, finishing the run) and released in
between, so another process, such as the app, can open it read-only and
follow progress in the call table while the run goes on.

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
from typing import Protocol, TypeVar

import duckdb
import pandas as pd
import pyarrow as pa
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from audit_core import store
from audit_core.errors import InputError
from audit_core.store.records import RunRecord
from audit_core.store.schema import RUN_RECORD_TABLES
from runners.recording.engines import Engine, Generated, LocalEngine
from runners.recording.sessions import Database

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


