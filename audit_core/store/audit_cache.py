"""Audit results kept beside the database, so an audit is computed once per dataset content.

An entry is keyed by what the result depends on: the dataset's content fingerprint
(`dataset_fingerprint`), the audit code (`code_fingerprint`), the kind of audit and
its parameters (resamples and seed, reference pool, slices). A finished run, a new call
or an ingest changes the fingerprint, so no runner has to invalidate anything: a
stale entry is simply never asked for again (and is removed when a newer one of the
dataset is stored).

Entries live in `<db folder>/<db stem>_cache/<dataset>/<entry>/`: one Parquet file per
table (and per string array), one .npy per numeric array, and a `manifest.json` holding
the key, the other fields as JSON and the size and SHA-256 of every file. The entry's
name is an HMAC of the key, and the manifest's first line an HMAC-SHA256 of the rest,
both under this installation's key (`audit_core.store.install_key`: in the user's own
configuration folder, never beside the database).

The cache is a convenience, never an input. An entry is used only when its manifest
authenticates under this installation's key, names exactly the key asked for, the result's class
and fields (and for a field holding a frozen dataclass, such as a judge change's verdict rule,
the class its annotation names with exactly its fields) and only file names this module writes,
and every file is a regular file of the recorded size and SHA-256. So an entry made or edited
elsewhere (by another installation, or with its file hashes updated to match edited data) is a
miss, and the result is recomputed from the database. A manifest is parsed only once it
authenticates, so one that is malformed or absurdly nested is a miss before any parsing. Nothing
is pickled and loading executes no code (`np.load(allow_pickle=False)`, Parquet, both from the
checked bytes). A link, FIFO, device or folder where a folder or file of the cache should be is
neither followed nor read (`audit_core.store.owned_files`): a miss, at once.

Nothing is written or removed outside the cache: `<db stem>_cache`, `<dataset>` and the
entry are reached without following links, so when one of them is a link (or a file) the
result is simply not kept; `store` returns why (logged at INFO only: the app keeps the result in
memory, `runners.analyze --cache-only` says it could not keep it). A result is written
into a fresh staging folder and renamed into place, so a reader sees a whole entry or
none. An entry is removed (when its key is stored again, or as stale: same dataset,
another content or code fingerprint) only when its manifest authenticates, that is when
this installation wrote it, and never through a link; anything else in the cache is left
alone, and an entry's place held by something this installation did not write means the
result is not kept. Entries of an earlier format are never read, nor removed (delete the
folder to reclaim their space). Without a usable key nothing is kept or read.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import hmac
import io
import json
import logging
import os
import re
import shutil
import stat
import typing
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.dtypes import StringDType

from audit_core.ingest.culturalframes import file_stem
from audit_core.stats.resampling import Resampling
from audit_core.store import install_key, owned_files

FORMAT = 2  # 2: authenticated manifests and entry names
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 16 << 20  # a manifest holds notes and small dicts; anything larger is not one of ours
DIGEST_HEX = 64  # the manifest's first line: HMAC-SHA256 of the rest, in hex
STAGING = ".staging-"  # entries being written; names starting with a dot are never entries
CODE_ROOT = Path(__file__).resolve().parents[1]  # audit_core: every module an audit result can depend on
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


def selection_key(content: str, dataset_id: str, resampling: Resampling, pool: str,
                  by: tuple[str, ...] = ()) -> dict[str, Any]:
    """The key of the selection audit `audit.audit_selection(data, resampling, by, calls)` on the
    reference pool `pool`, as the app and `runners.analyze` both compute it (the settings under
    the keys "resamples" and "seed")."""
    return cache_key(content, dataset_id, "selection", resamples=resampling.resamples, seed=resampling.seed,
                     pool=pool, by=list(by))


def rating_key(content: str, dataset_id: str, resampling: Resampling) -> dict[str, Any]:
    """The key of the rating audit `rating.audit.audit_rating(data, resampling)`."""
    return cache_key(content, dataset_id, "rating", resamples=resampling.resamples, seed=resampling.seed)


def judge_change_key(content: str, dataset_id: str, resampling: Resampling, pool: str, baseline: str,
                     candidate: str) -> dict[str, Any]:
    """The key of the judge change `compare_judges(pair_judges(data, baseline, candidate), resampling=resampling)`
    (standard gates, default verdict rule) on the reference pool `pool`, as the Judge comparison page and
    `runners.analyze --cache-only` both compute it."""
    return cache_key(content, dataset_id, "judge_change", resamples=resampling.resamples, seed=resampling.seed,
                     pool=pool, baseline=baseline, candidate=candidate)


def data_key(content: str, dataset_id: str, pool: str) -> dict[str, Any]:
    """The key of the loaded arrays `data.load_selection_data(con, dataset_id, pool)`."""
    return cache_key(content, dataset_id, "data", pool=pool)


def _sign(secret: bytes, data: bytes) -> str:
    """HMAC-SHA256 of `data` under `secret`, in hex."""
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


def _entry_name(secret: bytes, key: Mapping[str, Any]) -> str:
    """The name of `key`'s entry: an HMAC of the key, so installations sharing a folder never share an entry."""
    return _sign(secret, json.dumps(key, sort_keys=True).encode())[:32]


def _dataset_folder(db_path: str | Path, key: Mapping[str, Any]) -> tuple[Path, list[str]]:
    """(the database's folder, the names leading from it to `key`'s dataset folder in the cache)."""
    folder = cache_folder(db_path)
    return folder.parent, [folder.name, file_stem(str(key["dataset"]))]


def _manifest(entry: int, secret: bytes) -> dict | None:
    """The manifest of the open entry folder `entry` when it authenticates under `secret`, else None
    (parsed only then); OSError when it is not a regular file of bounded size."""
    data = owned_files.read_regular(entry, MANIFEST, MAX_MANIFEST_BYTES)
    signature, body = data[:DIGEST_HEX], data[DIGEST_HEX + 1:]
    if data[DIGEST_HEX:DIGEST_HEX + 1] != b"\n" or not hmac.compare_digest(signature, _sign(secret, body).encode()):
        return None
    try:
        manifest = json.loads(body)
    except (ValueError, RecursionError):  # never for a manifest this module wrote
        return None
    return manifest if isinstance(manifest, dict) else None


def _entry_manifest(dataset: int, name: str, secret: bytes) -> dict | None:
    """The authenticated manifest of the entry folder `name` in the open dataset folder, None when
    it is not an entry this installation wrote (a link, a file, no or a forged manifest)."""
    try:
        with owned_files.owned_folder(dataset, [name]) as entry:
            return _manifest(entry, secret)
    except OSError:
        return None


def has(db_path: str | Path, key: Mapping[str, Any]) -> bool:
    """Whether an entry this installation wrote is stored under `key` (its manifest authenticates
    and names `key`; whether its files are intact is `load`'s check)."""
    try:
        secret = install_key.installation_key(create=False)
        if secret is None:
            return False
        base, names = _dataset_folder(db_path, key)
        with owned_files.owned_folder(base, names) as dataset:
            manifest = _entry_manifest(dataset, _entry_name(secret, key), secret)
    except OSError:
        return False
    return manifest is not None and manifest.get("key") == dict(key)


def load(db_path: str | Path, key: Mapping[str, Any], cls: type[T]) -> T | None:
    """The `cls` result stored under `key` beside `db_path`, or None: absent, or not exactly what
    this installation stored (module docstring), which is logged."""
    try:
        secret = install_key.installation_key(create=False)
        if secret is None:
            return None
        base, names = _dataset_folder(db_path, key)
        with owned_files.owned_folder(base, [*names, _entry_name(secret, key)]) as entry:
            manifest = _manifest(entry, secret)
            if manifest is None:
                raise _Refused("its manifest was not written by this installation")
            return _rebuild(entry, manifest, key, cls)
    except FileNotFoundError:
        return None  # nothing stored yet
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:  # pyarrow's are OSError/ValueError
        log.info("audit cache entry of %s %s ignored: %s", key.get("kind"), key.get("dataset"), err)
        return None


FILE_NAME = re.compile(r"[0-9]{1,6}\.(npy|parquet)")


class _Refused(ValueError):
    """An entry that is not one this module wrote, or a file that is not what its manifest recorded."""


def _rebuild(entry: int, manifest: dict, key: Mapping[str, Any], cls: type[T]) -> T:
    """`cls` from the authenticated manifest of the open entry folder, once it names `key`, `cls` and
    exactly `cls`'s fields; _Refused otherwise."""
    if manifest.get("key") != dict(key) or manifest.get("class") != cls.__name__:
        raise _Refused("its manifest names another key or class")
    return _instance(entry, cls, manifest.get("fields"))


def _instance(entry: int, cls: type[T], fields: Any) -> T:
    """The dataclass `cls` from the specs of its fields (`_encode`), once they name exactly `cls`'s fields;
    _Refused otherwise. A field holding a dataclass is read as the class its annotation names."""
    names = [f.name for f in dataclasses.fields(cls)]
    if not isinstance(fields, dict) or sorted(fields) != sorted(names):
        raise _Refused(f"its manifest names other fields of {cls.__name__}")
    types = _field_types(cls)
    return cls(**{name: _decode(entry, fields[name], types[name]) for name in names})


@lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    """Field name -> the type its annotation names (`typing.get_type_hints`), per dataclass."""
    return typing.get_type_hints(cls)


def _dataclass_named(annotation: Any, name: Any) -> type:
    """The frozen dataclass called `name` that a field annotated `annotation` may hold (the class itself or a
    member of a union); _Refused when there is none, so a manifest never chooses a class of its own."""
    for option in typing.get_args(annotation) or (annotation,):
        if _is_frozen_dataclass(option) and option.__name__ == name:
            return option
    raise _Refused(f"a {name!r} where a field holds {annotation!r}")


def _is_frozen_dataclass(value: Any) -> bool:
    """Whether `value` is a frozen dataclass or an instance of one."""
    return dataclasses.is_dataclass(value) and value.__dataclass_params__.frozen


def _file_bytes(entry: int, spec: Mapping[str, Any]) -> bytes:
    """The bytes of the file a spec names, once its name is one this module writes and it is a
    regular file of the recorded size and SHA-256."""
    name, size = spec.get("file"), spec.get("bytes")
    if not (isinstance(name, str) and FILE_NAME.fullmatch(name) and isinstance(size, int) and size >= 0):
        raise _Refused(f"file {name!r} of {size!r} bytes")
    data = owned_files.read_regular(entry, name, size)
    if len(data) != size or hashlib.sha256(data).hexdigest() != spec.get("sha256"):
        raise _Refused(f"{name} changed")
    return data


def _decode(entry: int, spec: Any, annotation: Any = None) -> Any:
    """The value a manifest spec describes (`_encode`), for a field annotated `annotation` (what a
    dataclass spec may hold)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "frame":
        return pq.read_table(pa.BufferReader(_file_bytes(entry, spec))).to_pandas()
    if kind == "array":
        return np.load(io.BytesIO(_file_bytes(entry, spec)), allow_pickle=False)
    if kind == "strings" and isinstance(spec.get("shape"), list):
        column = pq.read_table(pa.BufferReader(_file_bytes(entry, spec))).column("value")
        if spec.get("compact") is not True:
            return np.asarray(column.to_numpy(zero_copy_only=False), dtype=object).reshape(spec["shape"])
        values, start = np.empty(len(column), dtype=StringDType()), 0
        for chunk in column.chunks:  # a Python string per value for one chunk at a time
            values[start:start + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
            start += len(chunk)
        return values.reshape(spec["shape"])
    if kind == "mapping" and isinstance(spec.get("items"), dict):
        return {str(k): _decode(entry, v) for k, v in spec["items"].items()}
    if kind == "none":
        return None
    if kind == "tuple" and isinstance(spec.get("value"), list):
        return tuple(spec["value"])
    if kind == "json" and "value" in spec:
        return spec["value"]
    if kind == "dataclass":  # its own checks (TypeError, ValueError) make a miss too
        return _instance(entry, _dataclass_named(annotation, spec.get("class")), spec.get("fields"))
    raise _Refused(f"entry of type {kind!r}")


def _encode(value: Any, staging: int, counter: list[int]) -> dict[str, Any]:
    """A manifest spec for `value`, writing its file into the open folder `staging`: frames as
    Parquet, numeric arrays as .npy (never pickled), string arrays (object or `StringDType`, read back as
    they were) as one Parquet column, dicts of arrays entry by entry, frozen dataclasses (resampling settings, a verdict rule…) field by field
    with their class's name; None, tuples and anything else JSON holds inline (TypeError for the rest)."""
    def file(ext: str, data: bytes) -> dict[str, Any]:
        counter[0] += 1
        name = f"{counter[0]}.{ext}"
        owned_files.write_new(staging, name, data)
        return {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    buffer = io.BytesIO()
    if isinstance(value, pd.DataFrame):
        value.to_parquet(buffer)
        return {"type": "frame", **file("parquet", buffer.getvalue())}
    if isinstance(value, np.ndarray):
        if value.dtype == object or isinstance(value.dtype, StringDType):
            if value.dtype == object and not all(isinstance(v, str) for v in value.flat):
                raise TypeError("an object array holding other than strings")
            pq.write_table(pa.table({"value": pa.array(value.ravel(), type=pa.string())}), buffer)
            return {"type": "strings", "shape": list(value.shape), "compact": value.dtype != object,
                    **file("parquet", buffer.getvalue())}
        np.save(buffer, value, allow_pickle=False)
        return {"type": "array", **file("npy", buffer.getvalue())}
    if isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
        return {"type": "mapping", "items": {str(k): _encode(v, staging, counter) for k, v in value.items()}}
    if value is None:
        return {"type": "none"}
    if isinstance(value, tuple):
        return {"type": "tuple", "value": list(value)}
    if _is_frozen_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name), staging, counter) for f in dataclasses.fields(value)}
        return {"type": "dataclass", "class": type(value).__name__, "fields": fields}
    json.dumps(value)  # TypeError for anything JSON cannot hold
    return {"type": "json", "value": value}


def _reason(err: Exception) -> str:
    """An error as a short phrase: an OSError's text and file name without its errno."""
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}: {err.filename}" if err.filename else err.strerror
    return str(err)


def store(db_path: str | Path, key: Mapping[str, Any], result: Any) -> str | None:
    """Keep the dataclass `result` under `key` beside `db_path`; None once kept, else why it was not
    (also logged).

    Written to a staging folder and renamed into place, so a reader sees a whole entry or
    none. Then the entries of the same dataset with another content or code fingerprint
    that this installation wrote are removed. Nothing is kept when there is no usable key,
    a folder of the cache is a link or cannot be written, the entry's place holds something
    this installation did not write, or a field is not one `_encode` can write.
    """
    try:
        secret = install_key.installation_key()
        base, names = _dataset_folder(db_path, key)
        with owned_files.owned_folder(base, names, create=True) as dataset:
            _place(dataset, _entry_name(secret, key), key, result, secret)
            _remove_stale(dataset, key, secret)
    except (OSError, TypeError, ValueError) as err:
        log.info("audit result not kept in %s: %s", cache_folder(db_path), _reason(err))
        return _reason(err)
    return None


def _place(dataset: int, name: str, key: Mapping[str, Any], result: Any, secret: bytes) -> None:
    """Write `result`'s entry as `name` in the open dataset folder, through a staging folder."""
    staging = owned_files.make_fresh_folder(dataset, STAGING)
    try:
        with owned_files.owned_folder(dataset, [staging]) as folder:
            counter = [0]
            fields = {field.name: _encode(getattr(result, field.name), folder, counter)
                      for field in dataclasses.fields(result)}
            body = json.dumps({"key": dict(key), "class": type(result).__name__, "fields": fields},
                              ensure_ascii=False).encode()
            owned_files.write_new(folder, MANIFEST, _sign(secret, body).encode() + b"\n" + body)
        _clear_place(dataset, name, secret)
        os.replace(staging, name, src_dir_fd=dataset, dst_dir_fd=dataset)
    except BaseException:
        shutil.rmtree(staging, dir_fd=dataset, ignore_errors=True)
        raise


def _clear_place(dataset: int, name: str, secret: bytes) -> None:
    """Remove the entry `name` of the open dataset folder when this installation wrote it (a result
    stored again); OSError when something else holds the name, which is left in place."""
    try:
        info = os.stat(name, dir_fd=dataset, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode) or _entry_manifest(dataset, name, secret) is None:
        raise OSError(errno.EEXIST, f"the entry's place {name} holds something this installation did not write "
                                    "(left in place)")
    shutil.rmtree(name, dir_fd=dataset)  # with dir_fd, rmtree never follows a link inside the entry


def _remove_stale(dataset: int, key: Mapping[str, Any], secret: bytes) -> None:
    """Remove the entries of the open dataset folder that this installation wrote for another
    content or code fingerprint than `key`'s; links, files, staging folders and folders without
    an authenticated manifest are left alone."""
    try:
        for item in os.scandir(dataset):
            if item.name.startswith(".") or not item.is_dir(follow_symlinks=False):
                continue
            manifest = _entry_manifest(dataset, item.name, secret)
            other = manifest.get("key") if manifest is not None else None
            if isinstance(other, dict) and (other.get("content"), other.get("code")) != (key["content"], key["code"]):
                shutil.rmtree(item.name, dir_fd=dataset)
    except OSError as err:  # the result is kept; an old entry stays until the next store
        log.info("stale audit cache entries not removed: %s", _reason(err))


def cached(db_path: str | Path, key: Mapping[str, Any], cls: type[T], compute: Callable[[], T]) -> tuple[T, str | None]:
    """The result stored under `key`, else `compute()` stored for next time; with None when the
    result is kept in the cache, else why it could not be (`store`)."""
    hit = load(db_path, key, cls)
    if hit is not None:
        return hit, None
    result = compute()
    return result, store(db_path, key, result)
