"""Input files a user names: each is a regular file of bounded size, checked before it is read.

A FIFO, a device (`/dev/zero`, `/dev/urandom`), a socket or a directory, or a
symlink to one, given where a file is expected is refused at once in one line
naming the file: `FILE: not a regular file (a FIFO)`. The path is stat-ed
first; then it is opened with O_NONBLOCK (opening a FIFO never waits for a
writer) and the open descriptor is checked again with fstat, so a FIFO or a
device swapped in between is still caught. A file larger than its kind's limit
is refused before it is read, and a read stops one byte past the limit, so a
file that grows after the check is refused too.

Limits, in bytes, by kind of input (each set by its environment variable,
a whole number of bytes):

    kind    default   variable                       what
    table   1 GiB     $JUDGE_AUDIT_MAX_TABLE_BYTES   tables (CSV, JSONL, Parquet), JudgeActs files,
                                                     scores JSON, CulturalFrames annotations
    shard   8 GiB     $JUDGE_AUDIT_MAX_SHARD_BYTES   a Parquet image shard (read in batches)
    image   256 MiB   $JUDGE_AUDIT_MAX_IMAGE_BYTES   one image file
    config  16 MiB    $JUDGE_AUDIT_MAX_CONFIG_BYTES  taxonomy, instruction, conditions, templates

Every reader of a user-given file goes through `opened`, `read_bytes` or `read_lines`, and a
folder given where a folder is expected through `folder`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from audit_core.errors import InputError

TABLE, SHARD, IMAGE, CONFIG = "table", "shard", "image", "config"
DEFAULT_LIMITS: dict[str, int] = {TABLE: 1 << 30, SHARD: 8 << 30, IMAGE: 256 << 20, CONFIG: 16 << 20}
_GROWTH_READ = 1 << 20  # bytes asked of each further read of a file that grew while it was read
_SPECIAL = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def limit_variable(kind: str) -> str:
    """The environment variable that sets `kind`'s limit."""
    return f"JUDGE_AUDIT_MAX_{kind.upper()}_BYTES"


def limit(kind: str) -> int:
    """The largest file of `kind` read, in bytes: its variable when set, else DEFAULT_LIMITS[kind]."""
    variable = limit_variable(kind)
    text = os.environ.get(variable, "").strip()
    if not text:
        return DEFAULT_LIMITS[kind]
    if not re.fullmatch(r"[0-9]{1,19}", text):
        raise InputError(f"expected a whole number of bytes, got {text[:40]!r}", field=f"${variable}")
    return int(text)


def not_regular(mode: int) -> str | None:
    """What a file of this st_mode is when it is not a regular file ("a FIFO", "a directory", …); None if it is."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _SPECIAL if test(mode)), "not a file")


def _refusal(path: Path, problem: str, where: dict | None, field: str | None) -> InputError:
    """The one-line error: "FILE: problem", or, inside a row that names the file, "row location: FILE: problem"."""
    if where is None:
        return InputError(problem, file=path, field=field)
    return InputError(f"{path}: {problem}", field=field, **where)


def _checked(path: Path, info: os.stat_result, kind: str, where: dict | None, field: str | None) -> None:
    """InputError unless `info` is a regular file within `kind`'s limit."""
    special = not_regular(info.st_mode)
    if special:
        raise _refusal(path, f"not a regular file ({special})", where, field)
    _within_limit(path, info.st_size, kind, where, field)


def _within_limit(path: Path, size: int, kind: str, where: dict | None, field: str | None) -> None:
    most = limit(kind)
    if size > most:
        raise _refusal(path, f"too large ({size:,} bytes; {kind} files are read up to {most:,} bytes, "
                             f"${limit_variable(kind)} sets the limit)", where, field)


def opened(
    path: str | Path, kind: str, *, what: str = "file", where: dict | None = None, field: str | None = None
) -> BinaryIO:
    """`path` open for reading in binary, once it is known to be a regular file within `kind`'s limit.

    InputError naming the file (or, with `where`, the row naming it, then the file) when it
    cannot be opened ("cannot read `what` (reason)"), is not a regular file (after symlinks)
    or is too large; never blocks.
    """
    path = Path(path)
    try:
        _checked(path, os.stat(path), kind, where, field)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise _refusal(path, f"cannot read {what} ({err.strerror or err})", where, field) from err
    try:
        _checked(path, os.fstat(fd), kind, where, field)  # what was opened, should the path have changed
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bytes(
    path: str | Path, kind: str, *, what: str = "file", where: dict | None = None, field: str | None = None
) -> bytes:
    """The bytes of `path`, checked as `opened` checks it; a file that grew past the limit while read is refused."""
    path = Path(path)
    most = limit(kind)
    with opened(path, kind, what=what, where=where, field=field) as handle:
        try:
            # min(limit, size) + 1 bytes first (a read allocates what it is asked for); more only if the file grew
            data = handle.read(min(most, os.fstat(handle.fileno()).st_size) + 1)
            while len(data) <= most and (more := handle.read(min(most + 1 - len(data), _GROWTH_READ))):
                data += more
        except OSError as err:
            raise _refusal(path, f"cannot read {what} ({err.strerror or err})", where, field) from err
    _within_limit(path, len(data), kind, where, field)
    return data


def read_lines(
    path: str | Path, kind: str, *, what: str = "file", where: dict | None = None, field: str | None = None
) -> Iterator[bytes]:
    """The lines of `path`, each with its b"\\n" (the last may lack one), read one at a time: the file is
    checked as `opened` checks it, and refused once more than its limit has been read (it grew)."""
    path = Path(path)
    most = limit(kind)
    read = 0
    with opened(path, kind, what=what, where=where, field=field) as handle:
        while True:
            try:
                line = handle.readline(most + 1 - read)
            except OSError as err:
                raise _refusal(path, f"cannot read {what} ({err.strerror or err})", where, field) from err
            if not line:
                return
            read += len(line)
            _within_limit(path, read, kind, where, field)
            yield line


def existing(path: str | Path, kind: str, *, where: dict | None = None, field: str | None = None) -> bool:
    """False when nothing is at `path` (a dangling symlink included); True when a regular file within
    `kind`'s limit is; InputError for anything else there (a FIFO, a device, a directory, too large)."""
    path = Path(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as err:  # e.g. a name too long, a path through a file
        raise _refusal(path, f"cannot read file ({err.strerror or err})", where, field) from err
    _checked(path, info, kind, where, field)
    return True


def folder(path: str | Path, expected: str = "") -> Path:
    """`path`, once it is known to be a directory (after symlinks); InputError naming it otherwise.

    `expected` says what the folder should hold, for the message.
    """
    path = Path(path)
    try:
        info = os.stat(path)
    except OSError as err:
        raise InputError(f"cannot read folder ({err.strerror or err})", file=path) from err
    if not stat.S_ISDIR(info.st_mode):
        what = not_regular(info.st_mode) or "a regular file"
        raise InputError(f"not a folder ({what}){'; expected ' + expected if expected else ''}", file=path)
    return path
