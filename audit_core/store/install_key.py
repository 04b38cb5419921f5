"""This installation's secret key, kept in the user's own configuration folder: it authenticates the
audit cache that this installation keeps beside databases.

The key is 32 random bytes at `$XDG_CONFIG_HOME/judge-audit/cache-key` (by default
`~/.config/judge-audit/cache-key`; a relative XDG_CONFIG_HOME is ignored, as the XDG
specification says), never beside a database: whoever can write a database's folder
cannot write it. It is made on first use with mode 0600 in a 0700 folder, written
under a temporary name and linked into place (`os.link` refuses an existing name),
so two processes making it at once end up using the same key, and no reader ever
sees half of one. A key file that is a link, not a regular file, not the user's
own, writable by others or not exactly 32 bytes is not used: `installation_key`
raises OSError saying so, and what depends on it (the audit cache) keeps and reads
nothing.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

KEY_BYTES = 32


def key_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the key of this installation is kept (module docstring); RuntimeError without a home folder."""
    config = environ.get("XDG_CONFIG_HOME", "")
    root = Path(config) if os.path.isabs(config) else Path.home() / ".config"
    return root / "judge-audit" / "cache-key"


def _read_key(path: Path) -> bytes | None:
    """The key at `path`, None when there is none; OSError when the file there is not a usable key."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(f"{path} is a link, not a key file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise OSError(f"{path} is not a regular file of yours that only you can write")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise OSError(f"{path} does not hold a {KEY_BYTES}-byte key")
    return key


def _make_key(path: Path) -> None:
    """Put a new random key at `path` unless another process put one there first."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}-{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, path)
    except FileExistsError:
        pass  # another process made the key first: both use that one
    finally:
        temporary.unlink(missing_ok=True)


def installation_key(create: bool = True) -> bytes | None:
    """This installation's key (module docstring), made now when `create` and there is none yet;
    None when there is none and `create` is false. OSError, saying why, when no usable key can be had
    (a file in the way, an unwritable configuration folder, no home folder)."""
    try:
        path = key_path()
    except RuntimeError as err:
        raise OSError(f"no configuration folder for the audit cache key: {err}") from None
    key = _read_key(path)
    if key is None and create:
        _make_key(path)
        key = _read_key(path)
        if key is None:
            raise OSError(f"{path} could not be made")
    return key
