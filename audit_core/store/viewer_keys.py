"""Viewer secrets: who may open the audit's pages of this installation's app from another machine.

When the app listens on a network address (`app_ui.access`), every page but Annotate opens only for a
visit that holds a valid viewer secret (`?key=`); `python -m runners.access grant|revoke|list` manages
them. The secrets themselves are printed once and never kept: the file keeps, per viewer name, the
SHA-256 of its secret, when it was granted and when revoked. It is app-wide, not per database:
`$XDG_CONFIG_HOME/judge-audit/viewer-keys` (by default `~/.config/judge-audit/viewer-keys`; a relative
XDG_CONFIG_HOME is ignored; `private_files`), JSON, mode 0600 in a 0700 folder, replaced whole
(written under a temporary name, then renamed over it) while an exclusive lock on `viewer-keys.lock`
keeps two commands from interleaving. A file that is a link, not a regular file, not the user's own or
writable by others is not trusted: reading it raises OSError saying so, and then no secret is valid.
`holder` compares hashes in constant time and reads the file on every call, so a revoked secret stops
working on the next page run.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from audit_core.errors import InputError
from audit_core.store.private_files import config_file, read_private, write_private
from audit_core.user_text import BLANK, blank

SECRET_BYTES = 32  # secrets.token_urlsafe(32): 43 characters
MAX_SECRET_CHARS = 4 * SECRET_BYTES  # a longer value is no secret of ours, whatever it hashes to
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class Viewer:
    """One granted viewer: its name, when its secret was granted, and when revoked (None while valid)."""

    name: str
    granted_at: str
    revoked_at: str | None


def keys_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the viewer secrets' hashes are kept (module docstring); RuntimeError without a home folder."""
    return config_file("viewer-keys", environ)


def _now() -> str:
    """The time now, UTC, as ISO 8601 to the second ("2026-12-02T19:10:00Z")."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def secret_sha256(secret: str) -> str:
    """SHA-256 of the secret's UTF-8 bytes, in hex: what the file keeps."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _read(path: Path) -> list[dict[str, str | None]]:
    """The file's entries ([] when there is none); OSError when the file there is not to be trusted."""
    data = read_private(path, MAX_FILE_BYTES, "the viewer secrets' file")
    if data is None:
        return []
    try:
        entries = json.loads(data.decode("utf-8"))["viewers"]
        if len(data) > MAX_FILE_BYTES or not all(isinstance(e.get("sha256"), str) for e in entries):
            raise ValueError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise OSError(f"{path} is not a viewer secrets' file") from None
    return entries


def _write(path: Path, entries: list[dict[str, str | None]]) -> None:
    """Replace the file by `entries`: a new 0600 file under a temporary name, renamed over the old one."""
    write_private(path, json.dumps({"viewers": entries}, indent=1).encode("utf-8"), replace=True)


@contextmanager
def _changing(path: Path) -> Iterator[list[dict[str, str | None]]]:
    """The entries, to change in place; written back when the block ends without error, under the lock."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        entries = _read(path)
        yield entries
        _write(path, entries)
    finally:
        os.close(fd)


def _name(name: str) -> str:
    if not isinstance(name, str) or blank(name):
        raise InputError(BLANK, field="--name")
    return name


def grant(name: str, path: Path | None = None) -> str:
    """A fresh secret for viewer `name` (`secrets.token_urlsafe`), its hash kept; an earlier secret of the
    same name is revoked. Returns the secret: it is not kept anywhere."""
    name, path = _name(name), path or keys_path()
    secret = secrets.token_urlsafe(SECRET_BYTES)
    now = _now()
    with _changing(path) as entries:
        for entry in entries:
            if entry["name"] == name and entry.get("revoked_at") is None:
                entry["revoked_at"] = now
        entries.append({"name": name, "sha256": secret_sha256(secret), "granted_at": now, "revoked_at": None})
    return secret


def revoke(name: str, path: Path | None = None) -> int:
    """Revoke viewer `name`'s valid secret; returns how many were revoked (0 or 1)."""
    name, path = _name(name), path or keys_path()
    now, revoked = _now(), 0
    with _changing(path) as entries:
        for entry in entries:
            if entry["name"] == name and entry.get("revoked_at") is None:
                entry["revoked_at"] = now
                revoked += 1
    return revoked


def viewers(path: Path | None = None) -> list[Viewer]:
    """Every viewer ever granted, in the order granted (a name granted twice appears twice)."""
    return [Viewer(str(e["name"]), str(e["granted_at"]), e.get("revoked_at")) for e in _read(path or keys_path())]


def holder(secret: str, path: Path | None = None) -> str | None:
    """The name of the viewer whose valid, unrevoked secret `secret` is; None for any other value, and when
    the file is missing or not to be trusted (module docstring). Every kept hash is compared, in constant time."""
    if not isinstance(secret, str) or not secret or len(secret) > MAX_SECRET_CHARS:
        return None
    try:
        entries = _read(path or keys_path())
    except (OSError, RuntimeError):
        return None
    presented, found = secret_sha256(secret), None
    for entry in entries:
        if hmac.compare_digest(str(entry["sha256"]), presented) and entry.get("revoked_at") is None:
            found = str(entry["name"])
    return found
