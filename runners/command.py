"""What the recording commands share: how a job's outcome becomes an exit status."""

from __future__ import annotations

import sys
from collections.abc import Callable

from audit_core.errors import InputError
from runners.database import DatabaseBusy
from runners.recorder import RunSummary


def run_job(job: Callable[[], RunSummary], *, interrupted: str) -> int:
    """Run a recording job and return its exit status.

    0 done (summary printed), 2 bad input (a database file that cannot be a store
    included: `DatabaseFileError`), 1 database held by another process, 130
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
    print(summary.describe())
    return 0
