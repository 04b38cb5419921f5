"""The folders this project keeps beside a database (audit cache, thumbnails), reached without following links.

The folder holding the database is the user's and is opened as named. The folders this
code makes inside it, and every file in them, are reached one name at a time relative
to an open folder (`dir_fd`) with O_NOFOLLOW, so a link planted at any level (or a folder
swapped for a link between a check and a use) makes the operation fail with OSError
instead of reading, writing or deleting elsewhere. Files are read only when they are
regular files of bounded size: a FIFO, a device or a folder in their place is refused
from its `lstat`, and the descriptor opened afterwards (O_NONBLOCK, so opening never
waits) is checked again with `fstat` before a bounded read. Files are written under a
fresh name (O_EXCL) and renamed into place, which replaces a link at that name rather
than writing through it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _one_name(name: str) -> str:
    """`name` when it names one entry of a folder (no separator, not `.` or `..`), else ValueError."""
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not a file name")
    return name


def open_folder(dir_fd: int, name: str, create: bool = False) -> int:
    """A new descriptor of the folder `name` in the open folder `dir_fd`, made (0755) first when
    `create` and missing. OSError when `name` is a link ("… is a link"), not a folder or missing."""
    _one_name(name)
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
        except FileExistsError:
            pass
    try:
        return os.open(name, FOLDER_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if err.errno not in {errno.ELOOP, errno.ENOTDIR}:  # Linux says ENOTDIR for a link opened this way
            raise
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, f"{name} is a link, and links are not followed here") from None
        raise OSError(errno.ENOTDIR, f"{name} is not a folder") from None


@contextmanager
def owned_folder(base: str | Path | int, parts: Sequence[str], create: bool = False) -> Iterator[int]:
    """A descriptor of `base/parts[0]/…/parts[-1]`, closed on exit: `base` (a path, followed as
    named, or an open folder) is the user's; each of `parts` must be a real folder, not a link
    (`open_folder`), and is made when `create` and missing."""
    fd = os.dup(base) if isinstance(base, int) else os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            child = open_folder(fd, part, create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def regular_stat(dir_fd: int, name: str) -> os.stat_result | None:
    """The `lstat` of `name` in `dir_fd` when it is a regular file (not a link, FIFO, device or
    folder), else None; OSError when it cannot be looked up (missing included)."""
    info = os.stat(_one_name(name), dir_fd=dir_fd, follow_symlinks=False)
    return info if stat.S_ISREG(info.st_mode) else None


def read_regular(dir_fd: int, name: str, limit: int) -> bytes:
    """The bytes of the regular file `name` in `dir_fd`, refused (OSError, nothing read) when it is
    a link, a FIFO, a device or a folder, or holds more than `limit` bytes."""
    if regular_stat(dir_fd, name) is None:
        raise OSError(errno.EINVAL, f"{name} is not a regular file")
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)  # what was opened, should `name` have been swapped since the lstat
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{name} is not a regular file")
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"{name} holds more than {limit} bytes")
        chunks, left = [], limit + 1  # one byte more than allowed shows a file that grew while read
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        raise OSError(errno.EFBIG, f"{name} holds more than {limit} bytes")
    return b"".join(chunks)


def write_new(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `name` in `dir_fd`, a file that must not exist yet (O_EXCL: never an existing
    file or the target of a link); a failed write leaves no file."""
    fd = os.open(_one_name(name), WRITE_FLAGS, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except BaseException:
        os.unlink(name, dir_fd=dir_fd)
        raise


def replace_file(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Put `data` at `name` in `dir_fd` atomically: written under a fresh hidden name, then renamed
    onto `name`, so a reader sees the old file or the new one, and a link at `name` is replaced,
    never written through."""
    temporary = f".{_one_name(name)}-{secrets.token_hex(8)}"
    write_new(dir_fd, temporary, data, mode)
    try:
        os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(temporary, dir_fd=dir_fd)
        raise


def make_fresh_folder(dir_fd: int, prefix: str) -> str:
    """The name of a new folder (0755) in `dir_fd` named `prefix` and random characters."""
    name = f"{prefix}{secrets.token_hex(8)}"
    os.mkdir(_one_name(name), 0o755, dir_fd=dir_fd)
    return name
