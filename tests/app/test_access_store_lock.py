"""Reads and writes of one store inside the server (`app_ui.store_lock`): why they must take turns, and
that they do: concurrent readers and one writer lose nothing and never see DuckDB refuse a connection."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

from app_ui import store_lock
from audit_core import store
from audit_core.errors import DatabaseFileError, DatabaseHeld

CLASH = "different configuration"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.duckdb"
    con = store.connect(path)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    return path


def test_duckdb_refuses_a_read_write_and_a_read_only_connection_to_one_file_in_one_process(db):
    """The fact the lock exists for: either order of opening fails at once, it does not wait."""
    reader = duckdb.connect(str(db), read_only=True)
    with pytest.raises(duckdb.ConnectionException, match=CLASH):
        duckdb.connect(str(db))
    reader.close()
    writer = duckdb.connect(str(db))  # the reader closed: the file is free again
    with pytest.raises(duckdb.ConnectionException, match=CLASH):
        duckdb.connect(str(db), read_only=True)
    writer.close()


def test_readers_and_a_writer_in_threads_never_clash_and_every_write_lands(db):
    failures: list[str] = []
    reads = [0]
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                with store_lock.reading(db) as con:
                    con.execute("SELECT count(*) FROM t").fetchone()
                reads[0] += 1
            except DatabaseFileError as err:
                failures.append(str(err))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for i in range(30):
            with store_lock.writing(db) as con, store.transaction(con):
                con.execute("INSERT INTO t VALUES (?)", [i])
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    with store_lock.reading(db) as con:
        assert con.execute("SELECT count(*), sum(x) FROM t").fetchone() == (30, sum(range(30)))
    assert failures == [] and reads[0] > 0


def test_a_read_nested_in_a_read_is_not_held_back_by_a_waiting_writer(db):
    """Writers go first, but a thread that already reads may open a second connection: no deadlock."""
    inner_opened = threading.Event()
    outer_open = threading.Event()

    def nested() -> None:
        with store_lock.reading(db):
            outer_open.set()
            time.sleep(0.3)  # a writer is waiting by now
            with store_lock.reading(db) as con:
                con.execute("SELECT 1").fetchone()
                inner_opened.set()

    reader = threading.Thread(target=nested)
    reader.start()
    outer_open.wait(5)
    with store_lock.writing(db, wait=10) as con, store.transaction(con):
        assert inner_opened.is_set()  # the writer got the file only after the nested read
        con.execute("INSERT INTO t VALUES (1)")
    reader.join(10)


def test_a_writer_kept_waiting_too_long_is_refused_with_the_file_unchanged(db):
    release = threading.Event()
    opened = threading.Event()

    def hold() -> None:
        with store_lock.reading(db):
            opened.set()
            release.wait(10)

    reader = threading.Thread(target=hold)
    reader.start()
    opened.wait(5)
    try:
        with pytest.raises(DatabaseHeld, match="try again"), store_lock.writing(db, wait=0.2):
            pytest.fail("the writer opened while a reader held the file")
    finally:
        release.set()
        reader.join(10)
    with store_lock.reading(db) as con:
        assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_writer_waits_for_a_reader_that_did_not_take_the_lock(db):
    """A page still opening read-only without `reading` delays a vote; it does not break it."""
    stray = store.connect(db, read_only=True)
    timer = threading.Timer(0.3, stray.close)
    timer.start()
    started = time.monotonic()
    with store_lock.writing(db, wait=10) as con, store.transaction(con):
        con.execute("INSERT INTO t VALUES (7)")
    assert time.monotonic() - started >= 0.25
    timer.join()
