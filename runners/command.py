"""What the commands share: how a job's outcome, or a read or write that failed, becomes an exit status."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import duckdb

from audit_core.errors import InputError
from runners.recording.sessions import DatabaseBusy

if TYPE_CHECKING:  # the commands that only write files (analyze, report) need not load the recorder
    from runners.recording.recorder import RunSummary

# A full disk, a read-only or vanished folder: the operating system's errors, and DuckDB's for its
# own files (an I/O error, a commit that could not be written, a checkpoint that failed and closed
# the database). Each store write is one transaction, so the database is as it was before it.
STORAGE_ERRORS: tuple[type[BaseException], ...] = (
    OSError, duckdb.IOException, duckdb.TransactionException, duckdb.FatalException,
)

_DUCKDB_FILE = re.compile(r'file "(?P<file>[^"]+)": (?P<cause>[^\n]+)')


def storage_failure(err: BaseException) -> str:
    """One line for a read or write that failed: "<file>: cannot read or write (<cause>)", the file
    when the error names one (an OSError's filename, or the quoted file of DuckDB's message), e.g.
    "data/a.duckdb.wal: cannot read or write (No space left on device)"."""
    if isinstance(err, OSError):
        file, cause = err.filename, err.strerror or str(err) or type(err).__name__
    else:
        text = str(err)
        named = _DUCKDB_FILE.search(text)
        file = named["file"] if named else None
        cause = named["cause"].strip() if named else (text.splitlines() or [type(err).__name__])[0]
    return f"{file}: cannot read or write ({cause})" if file is not None else f"cannot read or write ({cause})"


def refused(err: InputError | KeyError | ValueError) -> int:
    """Print the one line of input a command refuses and return 2: an InputError's own text (where
    and what), else the first argument of the KeyError or ValueError a lookup raised (an unknown
    dataset, pool or judge)."""
    text = str(err) if isinstance(err, InputError) or not err.args else str(err.args[0])
    print(f"error: {text}", file=sys.stderr)
    return 2


def storage_failed(err: BaseException, then: str) -> int:
    """Print `error: <storage_failure(err)>; <then>` (what was kept, what to do) as one line; returns 2."""
    print(f"error: {storage_failure(err)}; {then}", file=sys.stderr)
    return 2


def run_job(job: Callable[[], RunSummary], *, interrupted: str) -> int:
    """Run a recording job and return its exit status.

    0 done (summary printed), 2 bad input (a database file that cannot be a store
    included: `DatabaseFileError`) or a read or write that failed (`STORAGE_ERRORS`, a full
    disk: the calls committed before it are kept), 1 database held by another process, 130
    interrupted (`interrupted` says what was kept and how to resume).
    """
    try:
        summary = job()
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except DatabaseBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted: {interrupted}; run the same command again to resume", file=sys.stderr)
        return 130
    except STORAGE_ERRORS as err:
        return storage_failed(err, f"{interrupted}; run the same command again to resume")
    print(summary.describe())
    return 0
