"""The `--out` folder a user names: checked before any work, and written only by renaming into place.

Every writer of an output folder (`runners.analyze`, `runners.report`, `findings.export`) goes
through `OutputFolder`. A file is written under a fresh hidden name (created exclusively, so it
can be no one else's file or link) and then renamed over its final name
(`audit_core.store.owned_files.replace_file`): a link planted under that name is replaced by the file,
never written through, and a file with other hard links keeps its old content there. A subfolder (`figures/`) that is a link, or is not a
folder, is refused, never written into: what it points at is not ours to change. The folder
itself may be a link the user named; links inside it are never followed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

from audit_core.errors import InputError
from audit_core.store import owned_files


class OutputFolderError(InputError):
    """The `--out` folder cannot take the files: str(err) is "--out <path>: <what>; <what to do>"."""

    def __init__(self, out: Path, what: str) -> None:
        super().__init__(what, file=f"--out {out}")


def _not_writable(path: Path) -> str | None:
    """Why this process cannot create entries in the existing folder `path`, or None when it can."""
    if os.access(path, os.W_OK | os.X_OK):
        return None
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return "read-only file system"
    return "permission denied"


def check_out(out: Path, subfolders: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, an `out` that cannot become a folder of written files.

    Raises OutputFolderError for an existing file (or a link to nothing), a path under a file, a
    folder (or the nearest existing folder above a missing one) this process cannot write, a
    `subfolders` entry of an existing `out` that is a link or not a folder, and a path the system
    refuses to look up (a name too long, a loop of links). Creates nothing: a full disk, or a
    folder that changes after this check, is met by the writes themselves.
    """
    try:
        _check(out, subfolders)
    except OSError as err:
        raise OutputFolderError(out, f"cannot be used ({err.strerror or err}); name another folder") from None


def _check(out: Path, subfolders: tuple[str, ...]) -> None:
    """`check_out`, letting the OSError of a path that cannot be looked up through."""
    if out.exists() and not out.is_dir():
        raise OutputFolderError(out, "is a file, not a folder; name a folder (it is created when missing)")
    if not out.exists() and out.is_symlink():
        raise OutputFolderError(out, "is a link to nothing; remove it or name another folder")
    existing = out
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputFolderError(out, f"lies under {existing}, which is not a folder; name a folder elsewhere")
    reason = _not_writable(existing)
    if reason is not None:
        where = "cannot write in it" if existing == out else f"cannot create it in {existing}"
        raise OutputFolderError(out, f"{where} ({reason}); name a folder you can write")
    if existing == out:
        for name in subfolders:
            _check_subfolder(out, name)


def _check_subfolder(out: Path, name: str) -> None:
    """Refuse `out/name` when it exists as a link or as anything but a writable folder."""
    try:
        mode = os.lstat(out / name).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise OutputFolderError(out, f"{name} is a link; files are never written through links: remove it "
                                     "or name another folder")
    if not stat.S_ISDIR(mode):
        raise OutputFolderError(out, f"{name} is not a folder; remove it or name another folder")
    reason = _not_writable(out / name)
    if reason is not None:
        raise OutputFolderError(out, f"cannot write in {name} ({reason}); name a folder you can write")


class OutputFolder:
    """An open output folder (created when missing): files replaced by rename, subfolders that are not links.

    Use as a context manager: it holds the folder open, so every write lands in the folder that
    was checked even if a path above it is renamed meanwhile. The primitives are
    `audit_core.store.owned_files`' (the same rules as for the folders beside a database).
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    @classmethod
    def open(cls, path: Path) -> OutputFolder:
        """The folder `path` (a link the user named is followed), made with its parents when missing."""
        path.mkdir(parents=True, exist_ok=True)
        return cls(path, os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def write_text(self, name: str, text: str) -> Path:
        """Write `text` as `name` in UTF-8 (`write_bytes`); returns its path."""
        return self.write_bytes(name, text.encode("utf-8"))

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write `data` as `name`, replacing whatever entry had that name (a link is replaced, not followed);
        returns its path. On failure (a full disk) no partial file is left, and the OSError names `name`'s
        path rather than the hidden one."""
        try:
            owned_files.replace_file(self._fd, name, data)
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(self.path / name)) from err
        return self.path / name

    def subfolder(self, name: str) -> OutputFolder:
        """The folder `name` in this one, made when missing; OutputFolderError when it is a link or not a
        folder (what a link points at is never written)."""
        try:
            fd = owned_files.open_folder(self._fd, name, create=True)
        except OSError:
            _check_subfolder(self.path, name)  # says why in the --out terms: a link, or not a folder
            raise
        return OutputFolder(self.path / name, fd)

    @contextlib.contextmanager
    def staging(self) -> Iterator[Path]:
        """A new folder in this one for a writer that only takes paths (kaleido): `adopt` its files;
        whatever is left is removed on leaving."""
        name = owned_files.make_fresh_folder(self._fd, ".staging-")
        try:
            yield self.path / name
        finally:
            shutil.rmtree(self.path / name, ignore_errors=True)

    def adopt(self, staged: Path, name: str) -> Path:
        """Write the file `staged` (from `staging()`) as `name` here, as `write_bytes` does; returns its path."""
        return self.write_bytes(name, staged.read_bytes())
