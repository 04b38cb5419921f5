"""Files of this installation kept in the user's own configuration folder, readable and writable by the
user alone: the audit cache's key (`install_key`) and the viewer secrets' hashes (`viewer_keys`).

They live in `$XDG_CONFIG_HOME/judge-audit/` (by default `~/.config/judge-audit/`; a relative
XDG_CONFIG_HOME is ignored, as the XDG specification says), never beside a database. A file there is
trusted only when it is a regular file, not a link, owned by the user and writable by no one else;
it is read through one descriptor opened without following links or blocking, and written whole under a
temporary 0600 name, then moved into place, so no reader ever sees half of one.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path


def config_file(name: str, environ: Mapping[str, str] = os.environ) -> Path:
    """`$XDG_CONFIG_HOME/judge-audit/<name>` (module docstring); RuntimeError without a home folder."""
    config = environ.get("XDG_CONFIG_HOME", "")
    root = Path(config) if os.path.isabs(config) else Path.home() / ".config"
    return root / "judge-audit" / name


def read_private(path: Path, limit: int, what: str) -> bytes | None:
    """At most `limit` + 1 bytes of the file at `path`, None when there is none; OSError naming `what` the file
    should be when it is a link, not a regular file, not the user's own or writable by others."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(f"{path} is a link, not {what}") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise OSError(f"{path} is not a regular file of yours that only you can write")
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes, *, replace: bool) -> bool:
    """Put `data` at `path` as a 0600 file in a 0700 folder: written under a temporary name, then renamed over
    what is there (`replace`) or linked into place only if nothing is (else left as it is). Returns whether
    `data` was put there."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}-{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
        else:
            os.link(temporary, path)  # refuses an existing name: a file made first by another process stays
        return True
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)
