"""This installation's secret key, kept in the user's own configuration folder: it authenticates the
audit cache that this installation keeps beside databases.

The key is 32 random bytes at `$XDG_CONFIG_HOME/judge-audit/cache-key` (by default
`~/.config/judge-audit/cache-key`; `private_files`), never beside a database: whoever can
write a database's folder cannot write it. It is made on first use with mode 0600 in a 0700
folder, written under a temporary name and linked into place (`os.link` refuses an existing name),
so two processes making it at once end up using the same key, and no reader ever
sees half of one. A key file that is a link, not a regular file, not the user's
own, writable by others or not exactly 32 bytes is not used: `installation_key`
raises OSError saying so, and what depends on it (the audit cache) keeps and reads
nothing.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from audit_core.store.private_files import config_file, read_private, write_private

KEY_BYTES = 32


def key_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the key of this installation is kept (module docstring); RuntimeError without a home folder."""
    return config_file("cache-key", environ)


def _read_key(path: Path) -> bytes | None:
    """The key at `path`, None when there is none; OSError when the file there is not a usable key."""
    key = read_private(path, KEY_BYTES, "a key file")
    if key is not None and len(key) != KEY_BYTES:
        raise OSError(f"{path} does not hold a {KEY_BYTES}-byte key")
    return key


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
        write_private(path, secrets.token_bytes(KEY_BYTES), replace=False)  # or another process's, made first
        key = _read_key(path)
        if key is None:
            raise OSError(f"{path} could not be made")
    return key
