"""The audit cache's entries as a test reads and forges them, and audit results compared exactly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from audit_core.store import audit_cache, install_key


def assert_same_result(a: object, b: object) -> None:
    assert type(a) is type(b)
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, pd.DataFrame):
            pd.testing.assert_frame_equal(x, y, check_exact=True)
        else:
            assert x == y, field.name


def read_manifest(entry: Path) -> dict:
    """The body of an entry's manifest (after its authentication line)."""
    return json.loads((entry / "manifest.json").read_bytes().split(b"\n", 1)[1])


def sign_manifest(entry: Path, manifest: dict, secret: bytes | None = None) -> None:
    """Write `manifest` into `entry` authenticated with `secret` (by default this installation's key:
    what only this installation, or whoever holds its key, can do)."""
    body = json.dumps(manifest).encode()
    secret = install_key.installation_key() if secret is None else secret
    (entry / "manifest.json").write_bytes(audit_cache._sign(secret, body).encode() + b"\n" + body)
