"""A command's `main(argv)` run in a child process with a deadline and a memory cap.

For inputs that could block a read for ever (a FIFO) or flood it (`/dev/zero`): a
command that blocks fails its test after `timeout` seconds instead of hanging the
suite, and one that reads without end hits the cap instead of the machine's memory.
Children are forked from a forkserver that has imported the commands once, so each
run costs milliseconds, not an interpreter start.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import multiprocessing
import resource
from collections.abc import Sequence
from multiprocessing.connection import Connection

COMMANDS = ("runners.ingest", "runners.run_judge", "runners.run_rater", "runners.run_labeler", "runners.score")
MEMORY_CAP = 6 << 30  # bytes of address space: far above any command here, far below what /dev/zero would fill
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([*COMMANDS, __name__])


def _child(module: str, argv: list[str], out: Connection) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code: object = importlib.import_module(module).main(argv)
    except SystemExit as stop:
        code = stop.code
    except BaseException as exc:  # reported to the test, which fails on it
        code = f"raised {type(exc).__name__}: {str(exc)[:300]}"
    out.send((code, err.getvalue()))


def run_isolated(module: str, argv: Sequence[str], timeout: float = 30.0) -> tuple[object, str]:
    """(exit status, stderr) of `module.main(argv)` in a child; AssertionError when it is still
    running after `timeout` seconds (the child is killed). An exception escaping main comes back
    as the status "raised <type>: <message>"."""
    receive, send = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_child, args=(module, list(argv), send))
    child.start()
    send.close()
    try:
        if not receive.poll(timeout):
            raise AssertionError(f"{module} {' '.join(argv)} still running after {timeout} s (blocked on an input?)")
        return receive.recv()
    except EOFError:
        return f"died ({child.exitcode})", ""
    finally:
        child.kill()
        child.join()
        receive.close()
