"""Audit results kept beside the database, so an audit is computed once per dataset content.

An entry is keyed by what the result depends on: the dataset's content fingerprint
(`dataset_fingerprint`), the audit code (`code_fingerprint`), the kind of audit and
its parameters (resamples, seed, reference pool, slices). A finished run, a new call
or an ingest changes the fingerprint, so no runner has to invalidate anything: a
stale entry is simply never asked for again (and is removed when a newer one of the
dataset is stored).

Entries live in `<db folder>/<db stem>_cache/<dataset>/<hash of the key>/`: one Parquet
file per table (and per string array), one .npy per numeric array, and a `manifest.json`
holding the key, the other fields as JSON and the SHA-256 of every file. Nothing is
pickled and loading executes no code (`np.load(allow_pickle=False)`, Parquet): a manifest
that does not parse, names another key, other fields than the result's class or a file
name this module does not write, or a file whose hash differs, makes the entry a miss
(it is recomputed). When
the folder cannot be written the result is simply not kept (the app keeps it in memory).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from audit_core.ingest.culturalframes import file_stem

FORMAT = 1
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 16 << 20  # a manifest holds notes and small dicts; anything larger is not one of ours
CODE_ROOT = Path(__file__).resolve().parent  # audit_core: every module an audit result can depend on
log = logging.getLogger(__name__)
T = TypeVar("T")


def cache_folder(db_path: str | Path) -> Path:
    """`<db folder>/<db stem>_cache`, beside the database as its thumbnails are."""
    db = Path(db_path)
    return db.with_name(f"{db.stem}_cache")


def _data_tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, bool, list[str]]]:
    """(table, has dataset_id, hashed columns) of every table holding a dataset's rows: those with a
    dataset_id column, and those with a run_id column (rows of the dataset's runs). List, struct and
    map columns are left out of the hash (slot orders are in each call's request key)."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        tables.setdefault(table, []).append((column, kind))
    out = []
    for table, columns in tables.items():
        names = [c for c, _ in columns]
        if "dataset_id" not in names and "run_id" not in names:
            continue
        hashed = [c for c, kind in columns if not (kind.endswith("]") or kind.startswith(("STRUCT", "MAP", "UNION")))]
        out.append((table, "dataset_id" in names, hashed))
    return out


def dataset_fingerprint(con: duckdb.DuckDBPyConnection, dataset_id: str) -> str:
    """SHA-256 over, per table holding the dataset's rows, their count and the sum of their row
    hashes (DuckDB's `hash`): order-free, one scan per table, and it changes with any row added,
    removed or changed (a call recorded, a run finished, an ingest replacing ratings)."""
    parts = []
    for table, by_dataset, columns in _data_tables(con):
        where = "dataset_id = $d" if by_dataset else "run_id IN (SELECT run_id FROM runs WHERE dataset_id = $d)"
        hashed = ", ".join(f'"{c}"' for c in columns)
        count, total = con.execute(f'SELECT count(*), sum(hash({hashed})) FROM "{table}" WHERE {where}',
                                   {"d": dataset_id}).fetchone()
        parts.append(f"{table}:{count}:{total}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of every audit_core source file: a result computed by other code is another entry."""
    digest = hashlib.sha256()
    for path in sorted(CODE_ROOT.rglob("*.py")):
        digest.update(path.relative_to(CODE_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_key(content: str, dataset_id: str, kind: str, **params: Any) -> dict[str, Any]:
    """The key of `kind` on `dataset_id` whose content fingerprint is `content`, with JSON-able `params`."""
    return {"format": FORMAT, "kind": kind, "dataset": dataset_id, "content": content, "code": code_fingerprint(),
            **params}


def selection_key(content: str, dataset_id: str, resamples: int, seed: int, pool: str,
                  by: tuple[str, ...] = ()) -> dict[str, Any]:
    """The key of the selection audit `analysis.audit(data, resamples, seed, by, calls)` on the
    reference pool `pool`, as the app and `runners.analyze` both compute it."""
    return cache_key(content, dataset_id, "selection", resamples=resamples, seed=seed, pool=pool, by=list(by))


def rating_key(content: str, dataset_id: str, resamples: int, seed: int) -> dict[str, Any]:
    """The key of the rating audit `rating_audit.rating_audit(data, resamples, seed)`."""
    return cache_key(content, dataset_id, "rating", resamples=resamples, seed=seed)


def data_key(content: str, dataset_id: str, pool: str) -> dict[str, Any]:
    """The key of the loaded arrays `audit_data.load_audit_data(con, dataset_id, pool)`."""
    return cache_key(content, dataset_id, "data", pool=pool)


def _entry(db_path: str | Path, key: Mapping[str, Any]) -> Path:
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return cache_folder(db_path) / file_stem(str(key["dataset"])) / name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def has(db_path: str | Path, key: Mapping[str, Any]) -> bool:
    """Whether an entry is stored under `key` (not whether it will load: `load` checks that)."""
    return (_entry(db_path, key) / MANIFEST).is_file()


def load(db_path: str | Path, key: Mapping[str, Any], cls: type[T]) -> T | None:
    """The `cls` result stored under `key` beside `db_path`, or None (absent, unreadable or not
    exactly what was stored: a changed file, a manifest for other fields or another key)."""
    folder = _entry(db_path, key)
    manifest_path = folder / MANIFEST
    try:
        if not manifest_path.is_file() or manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        return _rebuild(folder, manifest, key, cls)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:  # pyarrow's are OSError/ValueError
        log.warning("audit cache entry %s ignored: %s", folder.name, err)
        return None


FILE_NAME = re.compile(r"[0-9]{1,6}\.(npy|parquet)")


def _rebuild(folder: Path, manifest: Any, key: Mapping[str, Any], cls: type[T]) -> T | None:
    """`cls` from a parsed manifest after checking it field by field, or None."""
    names = [f.name for f in dataclasses.fields(cls)]
    if not (isinstance(manifest, dict) and manifest.get("key") == dict(key) and manifest.get("class") == cls.__name__):
        return None
    fields = manifest.get("fields")
    if not isinstance(fields, dict) or sorted(fields) != sorted(names):
        return None
    return cls(**{name: _decode(folder, fields[name]) for name in names})


class _Refused(ValueError):
    """A manifest entry that is not one this module writes, or a file that is not what it recorded."""


def _file(folder: Path, spec: Mapping[str, Any]) -> Path:
    """The file a spec names, once its name is one this module writes and its SHA-256 the recorded one."""
    name = spec.get("file")
    if not (isinstance(name, str) and FILE_NAME.fullmatch(name)):
        raise _Refused(f"file name {name!r}")
    path = folder / name
    if spec.get("sha256") != _sha256(path):
        raise _Refused(f"{name} changed")
    return path


def _decode(folder: Path, spec: Any) -> Any:
    """The value a manifest spec describes (`_encode`)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "frame":
        return pq.read_table(_file(folder, spec)).to_pandas()
    if kind == "array":
        return np.load(_file(folder, spec), allow_pickle=False)
    if kind == "strings" and isinstance(spec.get("shape"), list):
        values = pq.read_table(_file(folder, spec)).column("value").to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=object).reshape(spec["shape"])
    if kind == "mapping" and isinstance(spec.get("items"), dict):
        return {str(k): _decode(folder, v) for k, v in spec["items"].items()}
    if kind == "none":
        return None
    if kind == "tuple" and isinstance(spec.get("value"), list):
        return tuple(spec["value"])
    if kind == "json" and "value" in spec:
        return spec["value"]
    raise _Refused(f"entry of type {kind!r}")


def _encode(value: Any, staging: Path, counter: list[int]) -> dict[str, Any]:
    """A manifest spec for `value`, writing its file into `staging`: frames as Parquet, numeric
    arrays as .npy (never pickled), string arrays as one Parquet column, dicts of arrays entry by
    entry, None, tuples and anything else JSON holds inline (TypeError for the rest)."""
    def file(ext: str) -> tuple[str, Path]:
        counter[0] += 1
        return f"{counter[0]}.{ext}", staging / f"{counter[0]}.{ext}"

    if isinstance(value, pd.DataFrame):
        name, path = file("parquet")
        value.to_parquet(path)
        return {"type": "frame", "file": name, "sha256": _sha256(path)}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            if not all(isinstance(v, str) for v in value.flat):
                raise TypeError("an object array holding other than strings")
            name, path = file("parquet")
            pq.write_table(pa.table({"value": pa.array(value.ravel(), type=pa.string())}), path)
            return {"type": "strings", "shape": list(value.shape), "file": name, "sha256": _sha256(path)}
        name, path = file("npy")
        np.save(path, value, allow_pickle=False)
        return {"type": "array", "file": name, "sha256": _sha256(path)}
    if isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
        return {"type": "mapping", "items": {str(k): _encode(v, staging, counter) for k, v in value.items()}}
    if value is None:
        return {"type": "none"}
    if isinstance(value, tuple):
        return {"type": "tuple", "value": list(value)}
    json.dumps(value)  # TypeError for anything JSON cannot hold
    return {"type": "json", "value": value}


def store(db_path: str | Path, key: Mapping[str, Any], result: Any) -> bool:
    """Keep the dataclass `result` under `key` beside `db_path`; returns whether it was kept.

    Written to a temporary folder and renamed into place, so a reader sees a whole entry or
    none. Entries of the same dataset with another content or code fingerprint are removed.
    Nothing is kept (False) when the folder cannot be written or a field is not one `_encode`
    can write.
    """
    folder = _entry(db_path, key)
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=parent))
        staging.chmod(0o755)  # readable like the database beside it (mkdtemp makes it private)
    except OSError:
        return False
    try:
        counter = [0]
        fields = {field.name: _encode(getattr(result, field.name), staging, counter)
                  for field in dataclasses.fields(result)}
        manifest = {"key": dict(key), "class": type(result).__name__, "fields": fields}
        (staging / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        os.replace(staging, folder)
    except (OSError, TypeError, ValueError) as err:
        log.warning("result not cached: %s", err)
        shutil.rmtree(staging, ignore_errors=True)
        return False
    _remove_stale(parent, key)
    return True


def _remove_stale(parent: Path, key: Mapping[str, Any]) -> None:
    """Remove the entries beside `key`'s whose content or code fingerprint is not `key`'s."""
    for entry in parent.iterdir():
        if not entry.is_dir() or entry.name.startswith(".staging-"):
            continue
        try:
            other = json.loads((entry / MANIFEST).read_text(encoding="utf-8")).get("key", {})
            stale = (other.get("content"), other.get("code")) != (key["content"], key["code"])
        except (OSError, ValueError, AttributeError):
            stale = True
        if stale:
            shutil.rmtree(entry, ignore_errors=True)


def cached(db_path: str | Path, key: Mapping[str, Any], cls: type[T], compute: Callable[[], T]) -> T:
    """The result stored under `key`, else `compute()`, stored for next time (when the folder allows)."""
    hit = load(db_path, key, cls)
    if hit is not None:
        return hit
    result = compute()
    store(db_path, key, result)
    return result
