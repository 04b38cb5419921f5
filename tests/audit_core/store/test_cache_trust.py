"""The audit cache and thumbnails beside a database: nothing outside their folders is touched, no side file is trusted.

Links planted at every level of the cache and thumbnail trees leave everything outside
unchanged (`store`, stale removal, `runners.analyze --cache-only`, the thumbnail maker);
a FIFO, a link to /dev/zero or a folder where a cache file, a thumbnail or the key should
be is ignored at once; entries forged in any way are misses, and the audit is recomputed
from the database; a cache that could not be kept is not announced as kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from audit_core import Resampling
from audit_core.selection.audit import SelectionAudit
from audit_core.store import audit_cache, install_key, thumbnails
from runners import analyze
from runners.audits import run_audits
from tests.support.cache import assert_same_result, read_manifest, sign_manifest, study_with_audit

DATASET = "small"
RESAMPLES = 50
STALE = "0" * 64  # a content fingerprint no dataset has: entries under it are stale
FORGED_REGRET = 123.0  # a value no audit computes, put into forged entries


def tree_state(root: Path) -> dict[str, tuple]:
    """Every path under `root`, links not followed: files by content, mode and mtime, links by target."""
    state: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root):  # os.walk lists links to folders without entering them
        for name in dirs + files:
            path = Path(folder, name)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                kind: tuple = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                kind = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mode, info.st_mtime_ns)
            else:
                kind = ("other", stat.S_IFMT(info.st_mode), info.st_mode)
            state[str(path.relative_to(root))] = kind
    return state


def finishes(action: Callable[[], object], seconds: float = 10.0) -> object:
    """What `action()` returns, failing the test when it has not returned within `seconds` (a
    daemon thread, so a blocked read cannot hold the test run)."""
    out: list = []
    worker = threading.Thread(target=lambda: out.append(action()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "blocked"
    assert out, "raised"
    return out[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, SelectionAudit, dict]:
    """(a database, its selection audit as `runners.analyze` computes it, that audit's cache key)."""
    return study_with_audit(tmp_path_factory.mktemp("trust") / "study.duckdb", DATASET, 30, RESAMPLES)


def fresh_db(built, folder: Path) -> Path:
    """A copy of the built database in `folder`, with no cache or thumbnails beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(built[0], folder / "study.duckdb"))


def slot(key: dict) -> str:
    """The name of `key`'s entry in this installation."""
    return audit_cache._entry_name(install_key.installation_key(), key)


def stored_entry(built, folder: Path, key: dict) -> Path:
    """The entry folder of `key` stored (with the built result) beside a scratch copy of the database in `folder`."""
    db = fresh_db(built, folder)
    assert audit_cache.store(db, key, built[1]) is None
    return db.with_name("study_cache") / DATASET / slot(key)


@pytest.fixture(scope="module")
def outside_template(built, tmp_path_factory) -> Path:
    """A folder laid out like a cache root, as links may point at: `small/` holds a genuine entry of
    the built key (under its own name), a genuine stale entry, a folder without a manifest and one
    with a foreign manifest; beside it a plain file and thumbnail-like folders."""
    root = tmp_path_factory.mktemp("outside")
    scratch = tmp_path_factory.mktemp("scratch")
    key = built[2]
    dataset = root / "root" / DATASET
    dataset.mkdir(parents=True)
    shutil.copytree(stored_entry(built, scratch / "a", key), dataset / slot(key))
    stale_key = {**key, "content": STALE}
    shutil.copytree(stored_entry(built, scratch / "b", stale_key), dataset / slot(stale_key))
    (dataset / "plain").mkdir()
    (dataset / "plain" / "1.parquet").write_bytes(b"data of someone else")
    (dataset / "foreign").mkdir()
    (dataset / "foreign" / "manifest.json").write_text('{"key": {}}')
    (root / "file.bin").write_bytes(b"a file of someone else")
    (root / "thumbs" / DATASET).mkdir(parents=True)
    (root / "thumbs" / DATASET / "c1.jpg").write_bytes(b"someone's picture")
    return root


CACHE_PLANTS = ["cache", "dataset", "entry", "manifest", "neighbour", "inside"]
KEPT_DESPITE = {"neighbour", "inside"}  # links beside the entry do not stop it from being kept


def plant_in_cache(db: Path, level: str, target: str, outside: Path, built) -> Path:
    """Plant a link at `level` of `db`'s cache, pointing at a folder (`target` "dir") or a file
    ("file") outside; returns the link."""
    key = built[2]
    root, file = outside / "root", outside / "file.bin"
    cache = db.with_name("study_cache")
    dataset = cache / DATASET
    point = {"cache": root, "dataset": root / DATASET, "entry": root / DATASET / slot(key),
             "manifest": root / DATASET / slot(key), "neighbour": root / DATASET / slot({**key, "content": STALE}),
             "inside": root / DATASET / "plain"}[level]
    point = file if target == "file" else point
    if level == "cache":
        link = cache
    elif level == "dataset":
        cache.mkdir()
        link = dataset
    elif level == "entry":
        dataset.mkdir(parents=True)
        link = dataset / slot(key)
    elif level == "manifest":  # a real entry folder whose manifest is a link to a genuine one elsewhere
        (dataset / slot(key)).mkdir(parents=True)
        link = dataset / slot(key) / "manifest.json"
        point = point / "manifest.json" if target == "dir" else point
    elif level == "neighbour":
        dataset.mkdir(parents=True)
        link = dataset / "neighbour"
    else:  # a genuine stale entry of this installation whose files and subfolder are links outside
        entry = stored_entry(built, db.parent / "scratch", {**key, "content": STALE})
        entry = Path(shutil.copytree(entry, dataset / entry.name))
        shutil.rmtree(db.parent / "scratch")
        inner = entry / read_manifest(entry)["fields"]["policies"]["file"]
        inner.unlink()
        inner.symlink_to(file)
        link = entry / "sub"
    link.symlink_to(point, target_is_directory=target == "dir")
    return link


@pytest.mark.parametrize("target", ["dir", "file"])
@pytest.mark.parametrize("level", CACHE_PLANTS)
def test_links_in_the_cache_leave_everything_outside_unchanged(built, outside_template, tmp_path, level, target,
                                                               capsys) -> None:
    outside = Path(shutil.copytree(outside_template, tmp_path / "outside", symlinks=True))
    db = fresh_db(built, tmp_path / "db")
    link = plant_in_cache(db, level, target, outside, built)
    before = tree_state(outside)
    _, result, key = built

    loaded = audit_cache.load(db, key, SelectionAudit)  # the genuine entry outside is not read through a link
    problem = audit_cache.store(db, key, result)
    status = analyze.main(["--db", str(db), "--dataset", DATASET, "--resamples", str(RESAMPLES), "--cache-only"])
    out, err = capsys.readouterr()

    assert tree_state(outside) == before
    assert loaded is None
    if level in KEPT_DESPITE:
        assert problem is None and status == 0 and "kept the audits in" in out
        assert_same_result(audit_cache.load(db, key, SelectionAudit), result)
        if level == "neighbour":
            assert link.is_symlink()  # not this installation's: left alone
        else:
            assert not link.parent.exists()  # this installation's stale entry: removed, its links with it
    else:
        assert problem and status == 2 and "kept the audits" not in out
        assert err.count("\n") == 1 and "could not be kept" in err
        assert audit_cache.load(db, key, SelectionAudit) is None
        assert link.is_symlink()


THUMB_PLANTS = ["thumbs", "dataset", "file"]


@pytest.mark.parametrize("target", ["dir", "file"])
@pytest.mark.parametrize("level", THUMB_PLANTS)
def test_links_in_the_thumbnails_leave_everything_outside_unchanged(outside_template, tmp_path, level,
                                                                    target) -> None:
    outside = Path(shutil.copytree(outside_template, tmp_path / "outside", symlinks=True))
    db = tmp_path / "db" / "study.duckdb"
    src = tmp_path / "c1.png"
    Image.new("RGB", (400, 300), (200, 40, 10)).save(src)
    dst = thumbnails.thumbnail_path(db, DATASET, "c1")
    point = {"thumbs": outside / "thumbs", "dataset": outside / "thumbs" / DATASET,
             "file": outside / "thumbs" / DATASET / "c1.jpg"}[level]
    point = outside / "file.bin" if target == "file" and level != "file" else point
    point = outside / "thumbs" if target == "dir" and level == "file" else point
    link = {"thumbs": dst.parent.parent, "dataset": dst.parent, "file": dst}[level]
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(point)
    os.utime(point, (2**31, 2**31), follow_symlinks=False)  # newer than the source: "current" if followed
    before = tree_state(outside)

    assert not thumbnails.is_current(src, dst)
    if level == "file":  # the link itself is replaced by the thumbnail
        assert thumbnails.make_thumbnail(src, dst) == dst
        assert dst.is_file() and not dst.is_symlink() and thumbnails.is_current(src, dst)
    else:
        with pytest.raises(OSError):
            thumbnails.make_thumbnail(src, dst)
        assert thumbnails.make_thumbnails(db, DATASET, {"c1": str(src)}) == {"made": 0, "current": 0, "failed": 1}
        assert link.is_symlink()
    assert tree_state(outside) == before


def special(path: Path, kind: str) -> None:
    """Put a FIFO, a link to /dev/zero or a folder at `path` (whatever was there removed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    {"fifo": os.mkfifo, "device": lambda p: p.symlink_to("/dev/zero"), "folder": Path.mkdir}[kind](path)


SPECIAL = ["fifo", "device", "folder"]


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("where", ["manifest", "data"])
def test_special_files_in_the_cache_are_ignored_at_once(built, tmp_path, where, kind) -> None:
    _, result, key = built
    db = fresh_db(built, tmp_path)
    assert audit_cache.store(db, key, result) is None
    entry = db.with_name("study_cache") / DATASET / slot(key)
    target = entry / ("manifest.json" if where == "manifest" else read_manifest(entry)["fields"]["policies"]["file"])
    special(target, kind)

    assert finishes(lambda: audit_cache.load(db, key, SelectionAudit)) is None
    assert finishes(lambda: audit_cache.has(db, key)) is (where == "data")  # has() reads the manifest only
    newer = {**key, "content": "1" * 64}  # storing another content scans this entry as a stale candidate
    assert finishes(lambda: audit_cache.store(db, newer, result)) is None
    if where == "manifest":  # not an entry of this installation: left as it is, and the key is not kept
        assert target.exists() or target.is_symlink()
        assert finishes(lambda: audit_cache.store(db, key, result)) is not None
    else:  # this installation's stale entry: removed
        assert not entry.exists()


@pytest.mark.parametrize("kind", SPECIAL)
def test_special_files_in_place_of_a_thumbnail_are_never_read(tmp_path, kind) -> None:
    db, src = tmp_path / "study.duckdb", tmp_path / "c1.png"
    Image.new("RGB", (40, 30), (200, 40, 10)).save(src)
    dst = thumbnails.thumbnail_path(db, DATASET, "c1")
    dst.parent.mkdir(parents=True)
    special(dst, kind)
    assert finishes(lambda: thumbnails.is_current(src, dst)) is False
    counts = finishes(lambda: thumbnails.make_thumbnails(db, DATASET, {"c1": str(src)}))
    assert counts == ({"made": 0, "current": 0, "failed": 1} if kind == "folder"
                      else {"made": 1, "current": 0, "failed": 0})  # a FIFO or link is replaced, not written through
    assert kind == "folder" or (dst.is_file() and not dst.is_symlink())


@pytest.mark.parametrize("kind", [*SPECIAL, "short", "others may write"])
def test_an_unusable_key_keeps_and_reads_nothing(built, tmp_path, monkeypatch, kind) -> None:
    _, result, key = built
    db = fresh_db(built, tmp_path / "db")
    assert audit_cache.store(db, key, result) is None  # kept with the session's key
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = install_key.key_path()
    path.parent.mkdir(parents=True)
    if kind == "short":
        path.write_bytes(b"x" * 8)
    elif kind == "others may write":
        path.write_bytes(os.urandom(install_key.KEY_BYTES))
        path.chmod(0o666)
    else:
        special(path, kind)
    before = tree_state(path.parent)
    assert finishes(lambda: audit_cache.load(db, key, SelectionAudit)) is None
    assert finishes(lambda: audit_cache.store(db, key, result)) is not None
    status = finishes(lambda: analyze.main(["--db", str(db), "--dataset", DATASET, "--resamples", str(RESAMPLES),
                                            "--cache-only"]))
    assert status == 2
    assert tree_state(path.parent) == before


def test_the_key_is_made_once_private_and_shared_by_racing_makers(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert install_key.installation_key(create=False) is None
    start = threading.Barrier(16)
    keys: list[bytes] = []

    def make() -> None:
        start.wait()
        keys.append(install_key.installation_key())

    workers = [threading.Thread(target=make) for _ in range(16)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    path = install_key.key_path()
    assert len(keys) == 16 and set(keys) == {path.read_bytes()} and len(keys[0]) == install_key.KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["cache-key"]  # no temporary left behind


def forge(entry: Path, how: str, tmp_path: Path) -> bool:
    """Forge `entry` (a genuine entry of the built key) as `how` says, the policies' first regret
    becoming FORGED_REGRET where data is edited; returns whether the forged entry is still this
    installation's (its manifest authenticates, so it is replaced when the result is stored again)."""
    manifest = read_manifest(entry)
    spec = manifest["fields"]["policies"]
    policies = entry / spec["file"]
    if how in {"data edited", "hashes updated", "hashes updated, signed with another key"}:
        frame = pd.read_parquet(policies)
        frame.loc[0, "regret"] = FORGED_REGRET
        frame.to_parquet(policies)
        spec.update(sha256=hashlib.sha256(policies.read_bytes()).hexdigest(), bytes=policies.stat().st_size)
    body = json.dumps(manifest).encode()
    signature = (entry / "manifest.json").read_bytes().split(b"\n", 1)[0]
    if how == "hashes updated":  # the old signature kept
        (entry / "manifest.json").write_bytes(signature + b"\n" + body)
    elif how == "hashes updated, signed with another key":
        sign_manifest(entry, manifest, os.urandom(32))
    elif how == "no signature":
        (entry / "manifest.json").write_bytes(body)
    elif how == "invalid signature":
        (entry / "manifest.json").write_bytes(b"0" * 64 + b"\n" + body)
    elif how == "deeply nested, unsigned":
        (entry / "manifest.json").write_bytes(signature + b"\n" + b"[" * 200_000 + b"]" * 200_000)
    elif how == "deeply nested, signed":  # only this installation could write it: parsing still ends in a miss
        nested = b"[" * 200_000 + b"]" * 200_000
        (entry / "manifest.json").write_bytes(audit_cache._sign(install_key.installation_key(), nested).encode()
                                              + b"\n" + nested)
    return how == "data edited"  # a manifest that authenticates but does not parse is not one it wrote


FORGERIES = ["data edited", "hashes updated", "hashes updated, signed with another key", "no signature",
             "invalid signature", "deeply nested, unsigned", "deeply nested, signed", "made with another key"]


@pytest.mark.parametrize("how", FORGERIES)
def test_forged_entries_are_misses_and_the_audit_is_recomputed(built, tmp_path, monkeypatch, how) -> None:
    _, result, key = built
    db = fresh_db(built, tmp_path / "db")
    entry = db.with_name("study_cache") / DATASET / slot(key)
    if how == "made with another key":  # an entry another installation wrote, copied to this one's name
        session = os.environ["XDG_CONFIG_HOME"]
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "other-config"))
        elsewhere = stored_entry(built, tmp_path / "elsewhere", key)
        monkeypatch.setenv("XDG_CONFIG_HOME", session)
        shutil.copytree(elsewhere, entry)
        ours = False
    else:
        assert audit_cache.store(db, key, result) is None
        ours = forge(entry, how, tmp_path)

    assert finishes(lambda: audit_cache.load(db, key, SelectionAudit)) is None
    audits = run_audits(db, DATASET, Resampling(RESAMPLES, 0))  # from the database, not from the forged entry
    assert_same_result(audits.result, result)
    assert FORGED_REGRET not in audits.result.policies["regret"].to_numpy()
    assert (audits.cache_problem is None) is ours  # a forged manifest is not this installation's: left in place
    if ours:
        assert_same_result(audit_cache.load(db, key, SelectionAudit), result)


def test_a_cache_that_could_not_be_kept_is_not_announced_as_kept(built, tmp_path, capsys) -> None:
    args = ["--dataset", DATASET, "--resamples", str(RESAMPLES), "--cache-only"]
    for blocker in ("a file", "a link to a folder", "a link to a file"):
        db = fresh_db(built, tmp_path / blocker.replace(" ", "_"))
        cache = db.with_name("study_cache")
        if blocker == "a file":
            cache.write_text("a file where the cache folder goes")
        else:
            cache.symlink_to(tmp_path if blocker == "a link to a folder" else db)
        assert analyze.main(["--db", str(db), *args]) == 2, blocker
        out, err = capsys.readouterr()
        assert "kept the audits" not in out and err.count("\n") == 1, blocker
        why = "study_cache is not a folder" if blocker == "a file" else "study_cache is a link"
        assert err.startswith(f"error: the audits could not be kept in {cache}: {why}"), blocker
    db = fresh_db(built, tmp_path / "fine")
    assert analyze.main(["--db", str(db), *args]) == 0
    assert f"kept the audits in {db.with_name('study_cache')}" in capsys.readouterr().out
