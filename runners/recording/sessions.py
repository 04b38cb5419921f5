"""How the recorder reaches the store: a connection held throughout, or a file opened per unit of work.

DuckDB locks the database file for as long as a read-write connection is open,
so a runner holding one for hours would keep every other process out, even one
that only wants to read progress (the app opens the file read-only). The
recorder therefore asks a `Database` for a short `session()` per unit of work
(planning, opening the run, each batch of calls, finishing the run):

- `HeldConnection` wraps a connection the caller opened and keeps open (the
  Python API, the demo builder, tests); sessions are free and nothing is
  released.
- `DatabaseFile` holds only a path: each session attaches the file to a
  long-lived in-memory DuckDB instance, yields a connection whose default
  catalog is that file, and detaches it afterwards, which checkpoints and
  releases the lock. A session starts no sooner than `release_gap` seconds
  after the previous one ended, so a reader gets in even when the backend
  answers instantly (a slower backend never waits for it). A file locked by
  another process is retried for `wait_seconds` (saying so once on
  stderr), then `DatabaseBusy` names the file. A file that cannot be a store
  (not a DuckDB database, a directory, read-only) raises
  `audit_core.errors.DatabaseFileError` at once. The instance never loads or
  downloads a DuckDB extension; it keeps external access, which ATTACH needs.

In both, Ctrl-C during a session waits for the session to end, so a commit
is never cut short (`DeferredInterrupt`).

Because the file lock no longer keeps a second runner out, `claim(dataset,
judge)` marks a judge name as being recorded for the duration of a run: an
advisory lock on a byte of `<db>.runner-lock` that the operating system drops
when the process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Protocol, TypeVar

import duckdb

from audit_core import store
from audit_core.errors import DatabaseHeld

ALIAS = "audit_store"  # catalog name of the attached file inside DatabaseFile's instance
DEFAULT_RELEASE_GAP = 0.02
_POLL_SECONDS = 0.05

T = TypeVar("T")


class DatabaseBusy(RuntimeError):
    """The database file, or the judge name in it, is in use by another process."""


class DeferredInterrupt:
    """Ctrl-C inside the block is held back and raised as KeyboardInterrupt when the block ends.

    DuckDB turns a SIGINT that arrives while it executes a statement into a
    "Query interrupted" error, which would cut a commit short and lose the
    KeyboardInterrupt. Only the main thread with Python's default SIGINT
    handler is affected; elsewhere the block runs unchanged. A block that
    raises keeps its own exception. `check()` raises a pending interrupt at
    once, for waits inside the block.
    """

    def __init__(self) -> None:
        self.pending = False
        self._previous: Callable[[int, FrameType | None], object] | int | None = None

    def __enter__(self) -> DeferredInterrupt:
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if exc_type is None:
            self.check()

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C came since the block began."""
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True


class Database(Protocol):
    """Where the recorder reads and writes; see the module docstring."""

    def session(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work; the store may be released when the block ends.

        Ctrl-C during the block is raised when it ends (see DeferredInterrupt).
        """
        ...

    def claim(self, dataset: str, judge: str) -> contextlib.AbstractContextManager[None]:
        """Exclusive right to record `judge` on `dataset` for the block; DatabaseBusy if taken."""
        ...


class HeldConnection:
    """A connection opened and closed by the caller, used as is for every session."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    @contextlib.contextmanager
    def session(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The held connection, left open; Ctrl-C is deferred to the end of the block."""
        with DeferredInterrupt():
            yield self.con

    @contextlib.contextmanager
    def claim(self, dataset: str, judge: str) -> Iterator[None]:
        """See `claim_judge`; an in-memory database has no file and nobody to exclude."""
        path = self.con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()")
        row = path.fetchone()
        if row is None or not row[0]:
            yield
            return
        with claim_judge(Path(row[0]), dataset, judge):
            yield


class DatabaseFile:
    """The store at `path`, locked only while a session is open.

    The first session creates or migrates the store (`audit_core.store.connect`);
    later ones attach the file (a few milliseconds, against tens for a new
    DuckDB instance). Not thread-safe: sessions are for one thread at a time
    and must not nest.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        wait_seconds: float | None = None,
        release_gap: float = DEFAULT_RELEASE_GAP,
    ) -> None:
        """`wait_seconds` None: `audit_core.store.write_lock_wait()` (30 s, or $JUDGE_AUDIT_LOCK_WAIT)
        when a session starts, so a bad value is a job's input error."""
        self.path = Path(path)
        self.wait_seconds = wait_seconds
        self.release_gap = release_gap
        self._instance: duckdb.DuckDBPyConnection | None = None
        self._migrated = False
        self._released_at = -float("inf")

    @contextlib.contextmanager
    def session(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Attach the file (waiting up to `wait_seconds` for a lock held elsewhere), yield, detach.

        Starts at least `release_gap` seconds after the previous session ended.
        Ctrl-C is deferred to the end of the block (raised at once while still
        waiting for the lock). Raises DatabaseBusy naming the file when the
        lock stays taken, DatabaseFileError when the file cannot be a store.
        """
        time.sleep(max(0.0, self._released_at + self.release_gap - time.monotonic()))
        with DeferredInterrupt() as interrupt:
            if not self._migrated:
                self._when_unlocked(lambda: store.connect(self.path, lock_wait=0.0).close(), interrupt)
                self._migrated = True
            con = self._when_unlocked(self._attach, interrupt)
            try:
                yield con
            finally:
                self._detach(con)
                self._released_at = time.monotonic()

    def claim(self, dataset: str, judge: str) -> contextlib.AbstractContextManager[None]:
        """See `claim_judge`."""
        return claim_judge(self.path, dataset, judge)

    def _attach(self) -> duckdb.DuckDBPyConnection:
        if self._instance is None:
            self._instance = duckdb.connect(":memory:", config=dict(store.NO_EXTENSIONS))
        literal = str(self.path).replace("'", "''")
        try:
            self._instance.execute(f"ATTACH '{literal}' AS {ALIAS}")
        except duckdb.Error as err:
            if store.is_locked(err):
                raise
            raise store.file_error(self.path, err, read_only=False) from None
        self._instance.execute(f"USE {ALIAS}")
        return self._instance

    def _detach(self, con: duckdb.DuckDBPyConnection) -> None:
        try:
            con.execute("USE memory")
            con.execute(f"DETACH {ALIAS}")
        except duckdb.Error:  # e.g. a transaction left open: dropping the instance releases the file too
            con.close()
            self._instance = None

    def _when_unlocked(self, action: Callable[[], T], interrupt: DeferredInterrupt) -> T:
        """`action()`, retried while another process holds the file's lock, up to `wait_seconds`
        (saying so once on stderr)."""
        wait = store.write_lock_wait() if self.wait_seconds is None else self.wait_seconds
        deadline = time.monotonic() + wait
        told = False
        while True:
            interrupt.check()
            try:
                return action()
            except (duckdb.IOException, DatabaseHeld) as err:
                if isinstance(err, duckdb.IOException) and not store.is_locked(err):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseBusy(
                        f"{self.path}: another process has held this database for over {wait:g} s "
                        "(a runner, an ingest or another writer); wait for it to finish, then run again"
                    ) from None
                if not told:
                    print(store.waiting_notice(self.path, wait), file=sys.stderr, flush=True)
                    told = True
            time.sleep(_POLL_SECONDS)


@contextlib.contextmanager
def claim_judge(path: Path, dataset: str, judge: str) -> Iterator[None]:
    """Hold the advisory lock for (`dataset`, `judge`) in the store at `path`; DatabaseBusy at once if taken.

    The lock is one byte of `<path>.runner-lock` chosen by hashing the names
    (a rare collision only keeps two judges from being recorded at the same
    time). It is a POSIX record lock: the operating system drops it when the
    process ends, and a process must not hold two claims on one store at the
    same time.
    """
    digest = hashlib.sha256(f"{dataset}\0{judge}".encode()).digest()
    offset = int.from_bytes(digest[:4], "big")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{path}.runner-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset, os.SEEK_SET)
        except OSError:
            raise DatabaseBusy(
                f"{path}: judge {judge!r} on dataset {dataset!r} is being recorded by another process; "
                "wait for it to finish (or stop it), then run again to resume"
            ) from None
        yield
    finally:
        os.close(fd)  # releases the lock


def as_database(target: Database | duckdb.DuckDBPyConnection | str | Path) -> Database:
    """A `Database` for a connection (held), a path (`DatabaseFile`) or a `Database` (as is)."""
    if isinstance(target, duckdb.DuckDBPyConnection):
        return HeldConnection(target)
    if isinstance(target, (str, Path)):
        return DatabaseFile(target)
    return target
