"""The audit cache's entries as a test reads and forges them, a synthetic study with its selection audit
and cache key, and audit results compared exactly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from audit_core import Resampling, SelectionAudit, audit_selection, load_selection_data, store
from audit_core.store import audit_cache, install_key
from benchmarks.synthetic import build_synthetic_db


def study_with_audit(db: Path, dataset: str, n_prompts: int, resamples: int) -> tuple[Path, SelectionAudit, dict]:
    """(`db`, built with `n_prompts` synthetic prompts as `dataset`; its selection audit as `runners.analyze`
    computes it, seed 0; that audit's cache key)."""
    build_synthetic_db(db, n_prompts=n_prompts, dataset_id=dataset)
    settings = Resampling(resamples, 0)
    con = store.connect(db, read_only=True)
    try:
        data, calls = load_selection_data(con, dataset), store.load_calls(con, dataset)
        key = audit_cache.selection_key(audit_cache.dataset_fingerprint(con, dataset), dataset, settings, "all")
    finally:
        con.close()
    return db, audit_selection(data, settings, calls=calls), key


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
