"""`runners.ingest judgeacts --images DIR`: images by candidate id from a folder or parquet shards, and thumbnails."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from audit_core import store
from audit_core.store import thumbnails
from runners import ingest
from tests.support.snapshots import snapshot

# prompt id -> its candidates' generators; candidate ids are "<prompt>_<generator>"
POOLS = {"p1": ("g1", "g2", "g3"), "p2": ("g1", "g2", "g3"), "p3": ("g1", "g2")}
CANDIDATES = [f"{pid}_{g}" for pid, gens in POOLS.items() for g in gens]


def encoded(size: tuple[int, int], kind: str, colour: tuple[int, ...] = (200, 40, 10)) -> bytes:
    mode = "RGBA" if len(colour) == 4 else "RGB"
    out = io.BytesIO()
    Image.new(mode, size, colour).save(out, format=kind)
    return out.getvalue()


def write_pools(root: Path) -> Path:
    """A tiny derived split (no image paths of its own) laid out as a JudgeActs artifact."""
    rows = [
        {"prompt_id": pid, "prompt": f"prompt {pid}", "country": "Peru", "category": "food",
         "candidates": [{"id": f"{pid}_{g}", "source_model": g, "utility": k / 2, "alignment_ratings": [k / 2]}
                        for k, g in enumerate(gens)]}
        for pid, gens in POOLS.items()
    ]
    derived = root / "art" / "data" / "derived"
    derived.mkdir(parents=True)
    path = derived / "main.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(db: Path, pools: Path, images: Path | None, *extra: str) -> int:
    argv = ["judgeacts", "--pools", str(pools), "--db", str(db), "--dataset", "ds", *extra]
    return ingest.main(argv + (["--images", str(images)] if images is not None else []))


def image_paths(db: Path) -> dict[str, str | None]:
    con = store.connect(db, read_only=True)
    try:
        frame = store.load_candidates(con, "ds")
    finally:
        con.close()
    return {c: p if isinstance(p, str) else None for c, p in zip(frame["candidate_id"], frame["image_path"])}


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Images for three candidates (PNG, JPEG, WebP), a stray image and a text file."""
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "p1_g1.png").write_bytes(encoded((600, 400), "PNG"))
    (folder / "p1_g2.JPG").write_bytes(encoded((300, 900), "JPEG"))
    (folder / "p2_g3.webp").write_bytes(encoded((100, 50), "WEBP"))
    (folder / "stranger.png").write_bytes(encoded((10, 10), "PNG"))
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_attach_from_a_folder_with_thumbnails(tmp_path, folder, capsys):
    pools, db = write_pools(tmp_path), tmp_path / "store.duckdb"
    assert run(db, pools, folder) == 0
    out = capsys.readouterr().out
    assert f"images: 3 of {len(CANDIDATES)} candidates attached from {folder}, every one decoded; " \
           f"{len(CANDIDATES) - 3} without an image; 1 image(s) there name no candidate" in out, out
    assert "thumbnails: 3 made" in out
    paths = image_paths(db)
    assert paths == {c: None for c in CANDIDATES} | {
        "p1_g1": str((folder / "p1_g1.png").resolve()),
        "p1_g2": str((folder / "p1_g2.JPG").resolve()),
        "p2_g3": str((folder / "p2_g3.webp").resolve()),
    }
    expected = {"p1_g1": (256, 171), "p1_g2": (85, 256), "p2_g3": (100, 50)}  # long edge 256, never enlarged
    for cid, size in expected.items():
        thumb = tmp_path / "store_thumbs" / "ds" / f"{cid}.jpg"
        assert thumb == thumbnails.thumbnail_path(db, "ds", cid)
        with Image.open(thumb) as image:
            assert (image.format, image.size) == ("JPEG", size)
    assert sorted(p.name for p in (tmp_path / "store_thumbs" / "ds").iterdir()) == sorted(f"{c}.jpg" for c in expected)


def write_shard(release: Path, rows: list[dict]) -> Path:
    (release / "data").mkdir(parents=True, exist_ok=True)
    path = release / "data" / "train-00000-of-00001.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return path


def shard_rows() -> list[dict]:
    return [
        {"id": "p1_g3", "image": {"bytes": encoded((512, 512), "PNG"), "path": None}, "prompt": "x"},
        {"id": "elsewhere_g1", "image": {"bytes": b"not decoded: no candidate", "path": None}, "prompt": "y"},
        {"id": "p3_g2", "image": {"bytes": encoded((40, 80), "JPEG"), "path": None}, "prompt": "z"},
    ]


def test_attach_from_a_parquet_shard(tmp_path, capsys):
    pools, db, release = write_pools(tmp_path), tmp_path / "db" / "store.duckdb", tmp_path / "release"
    rows = shard_rows()
    write_shard(release, rows)
    assert run(db, pools, release) == 0
    out = capsys.readouterr().out
    written = (tmp_path / "db" / "images" / "ds").resolve()  # the database's images folder
    assert f"images: 2 of {len(CANDIDATES)} candidates attached from 1 parquet shard(s) in {release}" in out, out
    assert f"images: 2 written to {written}" in out
    paths = image_paths(db)
    assert paths == {c: None for c in CANDIDATES} | {"p1_g3": str(written / "p1_g3.png"), "p3_g2": str(written / "p3_g2.jpg")}
    assert Path(paths["p1_g3"]).read_bytes() == rows[0]["image"]["bytes"]
    assert Path(paths["p3_g2"]).read_bytes() == rows[2]["image"]["bytes"]
    assert sorted(p.name for p in written.parent.iterdir()) == ["ds"]  # no staging folder left
    with Image.open(thumbnails.thumbnail_path(db, "ds", "p1_g3")) as image:
        assert image.size == (256, 256)


@pytest.mark.parametrize(
    "case",
    ["truncated png", "not an image", "two files for one candidate", "symlink out of the folder"],
)
def test_a_bad_image_in_a_folder_is_refused(tmp_path, folder, case, capsys):
    pools, db = write_pools(tmp_path), tmp_path / "store.duckdb"
    bad = folder / "p2_g1.png"
    if case == "truncated png":
        bad.write_bytes(encoded((64, 64), "PNG")[:60])
        expected = f"{bad}, field 'image': image cannot be decoded"
    elif case == "not an image":
        bad.write_bytes(b"hello")
        expected = f"{bad}, field 'image': image cannot be decoded (not a format Pillow knows)"
    elif case == "two files for one candidate":
        (folder / "p1_g1.jpeg").write_bytes(encoded((8, 8), "JPEG"))
        expected = f"{folder}: candidate 'p1_g1' has two images here: p1_g1.jpeg and p1_g1.png"
    else:
        (tmp_path / "secret.png").write_bytes(encoded((8, 8), "PNG"))
        bad.symlink_to(tmp_path / "secret.png")
        expected = f"{bad}, field 'image': 'p2_g1.png' leads outside the dataset's folder"
    before = files_under(tmp_path)
    assert run(db, pools, folder) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert "nothing was written: the database is unchanged" in err and "Traceback" not in err
    assert files_under(tmp_path) == before  # no database, no thumbnails

    if case != "truncated png":
        return
    # into a database that holds the dataset already: exactly as it was
    assert run(db, pools, None) == 0
    held = snapshot(db)
    assert run(db, pools, folder, "--replace") == 2
    assert expected in capsys.readouterr().err
    assert snapshot(db) == held


def test_a_corrupt_image_in_a_shard_is_refused(tmp_path, capsys):
    pools, db, release = write_pools(tmp_path), tmp_path / "db" / "store.duckdb", tmp_path / "release"
    rows = shard_rows()
    rows[2]["image"] = {"bytes": encoded((40, 80), "JPEG")[:-200], "path": None}
    shard = write_shard(release, rows)
    before = files_under(tmp_path)
    assert run(db, pools, release) == 2
    err = capsys.readouterr().err
    assert f"{shard} line 3, field 'image.bytes': image cannot be decoded" in err, err
    assert files_under(tmp_path) == before  # no database, images folder, staging folder or thumbnails


@pytest.mark.parametrize("source", ["folder", "shard"])
def test_reingest_with_the_same_images_changes_nothing(tmp_path, folder, source, capsys):
    pools, db = write_pools(tmp_path), tmp_path / "store.duckdb"
    images = folder
    if source == "shard":
        images = tmp_path / "release"
        write_shard(images, shard_rows())
    assert run(db, pools, images) == 0
    first, thumbs = snapshot(db), tmp_path / "store_thumbs" / "ds"
    stamps = {p.name: p.stat().st_mtime_ns for p in thumbs.iterdir()}
    capsys.readouterr()
    assert run(db, pools, images) == 0
    out = capsys.readouterr().out
    assert "pools: unchanged" in out
    assert snapshot(db) == first
    if source == "folder":  # the sources are untouched, so their thumbnails are not made again
        assert f"thumbnails: 0 made, {len(stamps)} already current" in out
        assert {p.name: p.stat().st_mtime_ns for p in thumbs.iterdir()} == stamps


def test_attaching_images_to_a_dataset_ingested_without_them_needs_replace(tmp_path, folder, capsys):
    pools, db = write_pools(tmp_path), tmp_path / "store.duckdb"
    assert run(db, pools, None) == 0
    held = snapshot(db)
    assert run(db, pools, folder) == 2
    assert "already exists with different pools or ratings; pass --replace" in capsys.readouterr().err
    assert snapshot(db) == held
    assert run(db, pools, folder, "--replace") == 0
    assert sum(p is not None for p in image_paths(db).values()) == 3


def test_thumbnail_of_a_transparent_image_and_of_unsafe_names(tmp_path):
    src = tmp_path / "a.png"
    src.write_bytes(encoded((1000, 10), "PNG", (0, 0, 0, 0)))
    dst = thumbnails.thumbnail_path(tmp_path / "x.duckdb", "../up", "a/../../b")
    assert dst.parent.parent == tmp_path / "x_thumbs"  # names that are not file names are hashed
    thumbnails.make_thumbnail(src, dst)
    with Image.open(dst) as image:
        assert (image.mode, image.size) == ("RGB", (256, 3))
        assert image.getpixel((128, 1)) == (255, 255, 255)  # transparency flattened onto white
    assert thumbnails.is_current(src, dst)
    os.utime(src, (dst.stat().st_mtime + 10,) * 2)
    assert not thumbnails.is_current(src, dst)


def test_the_explorer_grid_draws_thumbnails_made_when_missing(tmp_path, folder):
    import streamlit as st

    from app_ui import context, draw

    db, src = tmp_path / "store.duckdb", str(folder / "p1_g1.png")

    class Chosen:
        db_path, dataset_id = str(db), "ds"

    st.session_state[context._SELECTION] = Chosen()
    try:
        drawn = draw.grid_image(src, "p1_g1")
        assert drawn == str(thumbnails.thumbnail_path(db, "ds", "p1_g1"))
        with Image.open(drawn) as image:
            assert image.size == (256, 171)
        assert draw.grid_image(None, "p1_g2") is None  # no image: the tile says so
    finally:
        del st.session_state[context._SELECTION]
