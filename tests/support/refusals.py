"""Refused inputs: special files to give a command, the one error line of a refused command, and the
characters that make a name blank."""

from __future__ import annotations

import os
from pathlib import Path


def error_line(err: str) -> str:
    """The one error line of a refused ingest; fails unless stderr is that line (with ingest's
    "nothing was written" after it) and holds no traceback."""
    lines = [line for line in err.splitlines() if not line.startswith("nothing was written")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# whitespace (str.isspace), zero-width and other format characters, a direction override and isolate
BLANK_CHARACTERS = " \t\n\r\x0b\x0c\u00a0\u1680\u2003\u2028\u3000\u200b\u200c\u200d\u2060\ufeff\u200e\u202e\u2066"


def make_special(path: Path, kind: str, linked: bool) -> Path:
    """Put a FIFO, a directory or a device at `path` (or a symlink to one beside it); returns the path to name."""
    if kind.startswith("/dev/") and not linked:
        return Path(kind)
    target = path.with_name(path.name + ".target") if linked else path
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    else:
        target = Path(kind)
    if linked:
        path.symlink_to(target)
    return path
