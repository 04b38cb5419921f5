"""Reads and writes of one store file inside the app's server take turns: a readers–writer lock per file.

DuckDB keeps one database instance per file and process, and refuses a connection whose settings differ
from the open ones: inside one process a read-write open of a file fails while a read-only connection to
it is open, and a read-only open fails while a read-write one is ("Can't open a connection to same
database file with a different configuration", a ConnectionException; tests/app/test_access_store_lock.py
shows both). Across processes DuckDB's file lock decides, and `audit_core.store.connect` waits for it.
So in the server, connections to a file go through `reading` (any number at once, read-only) or `writing`
(one, read-write, alone, for one short transaction: the Annotate page's vote). A waiting writer goes
first: a reader arriving then waits too, unless its thread already reads (a nested read cannot deadlock).
A read-only open made without `reading` can still meet a writer's connection; `writing` waits for such
readers to close, and they fail at worst (DatabaseFileError) for the milliseconds a vote takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from audit_core import store
from audit_core.errors import DatabaseFileError, DatabaseHeld

WRITE_WAIT = 10.0  # seconds a vote waits for the readers of its file to close before it is refused
_POLL = 0.01
_CONFLICT = "different configuration"  # DuckDB's words for a read-only/read-write clash inside a process


class _FileLock:
    """Readers count, an active writer, waiting writers (they go first), and each thread's read depth."""

    def __init__(self) -> None:
        self.turn = threading.Condition()
        self.readers = 0
        self.writing = False
        self.waiting_writers = 0
        self.depth = threading.local()

    def acquire_read(self) -> None:
        nested = getattr(self.depth, "n", 0) > 0
        with self.turn:
            self.turn.wait_for(lambda: not self.writing and (nested or not self.waiting_writers))
            self.readers += 1
        self.depth.n = getattr(self.depth, "n", 0) + 1

    def release_read(self) -> None:
        self.depth.n -= 1
        with self.turn:
            self.readers -= 1
            self.turn.notify_all()

    def acquire_write(self, wait: float) -> bool:
        with self.turn:
            self.waiting_writers += 1
            try:
                got = self.turn.wait_for(lambda: not self.writing and not self.readers, timeout=wait)
                self.writing = got
                return got
            finally:
                self.waiting_writers -= 1
                self.turn.notify_all()

    def release_write(self) -> None:
        with self.turn:
            self.writing = False
            self.turn.notify_all()


_LOCKS: dict[Path, _FileLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(path: str | Path) -> _FileLock:
    """The lock of the file `path` names (one per resolved path, for the life of the process)."""
    real = Path(path).resolve()
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(real, _FileLock())


@contextmanager
def reading(path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to the store at `path` (`store.connect`), open while no vote is written to it."""
    lock = _lock(path)
    lock.acquire_read()
    try:
        con = store.connect(path, read_only=True)
        try:
            yield con
        finally:
            con.close()
    finally:
        lock.release_read()


@contextmanager
def writing(path: str | Path, wait: float = WRITE_WAIT) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection to the store at `path`, the only connection to it in this process while
    open; keep it for one transaction. DatabaseHeld when its readers (or another process) hold the
    file for over `wait` seconds."""
    lock = _lock(path)
    deadline = time.monotonic() + wait
    if not lock.acquire_write(wait):
        raise DatabaseHeld(f"read by other pages for over {wait:g} s; try again", file=path)
    try:
        con = _open_alone(path, deadline, wait)
        try:
            yield con
        finally:
            con.close()
    finally:
        lock.release_write()


def _open_alone(path: str | Path, deadline: float, wait: float) -> duckdb.DuckDBPyConnection:
    """store.connect(path) read-write, retried while a read-only connection opened without `reading` is
    still open in this process (DuckDB refuses the clash; it does not wait for it)."""
    while True:
        try:
            return store.connect(path, read_only=False, lock_wait=max(deadline - time.monotonic(), 0.0))
        except DatabaseFileError as err:
            if isinstance(err, DatabaseHeld) or _CONFLICT not in str(err) or time.monotonic() >= deadline:
                if _CONFLICT in str(err):
                    raise DatabaseHeld(f"read by other pages for over {wait:g} s; try again", file=path) from None
                raise
        time.sleep(_POLL)
