"""The app never shows a traceback: an image that cannot be shown is a labelled placeholder and
the page goes on; an unexpected error is one line without its text or server paths."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest

from app_ui import draw
from audit_core.selection import browse
from tests.support.app import build_app_db, open_app

POOL = "p002"  # a 3-candidate pool: one image undecodable, one missing, one not an image at all


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Path:
    """The test database with pool POOL's images broken three ways, in a folder outside the repo."""
    tmp = tmp_path_factory.mktemp("broken")
    db = build_app_db(tmp / "b.duckdb", tmp / "images", n_prompts=4)
    con = duckdb.connect(str(db))
    (garbled, gone, other) = [row[0] for row in con.execute(
        "SELECT image_path FROM candidates WHERE prompt_id = ? ORDER BY candidate_id", [POOL]).fetchall()]
    Path(garbled).write_bytes(Path(garbled).read_bytes()[:40])  # a PNG header, then nothing
    Path(gone).unlink()
    secret = tmp / "secret.txt"
    secret.write_text("server configuration\n")
    con.execute("UPDATE candidates SET image_path = ? WHERE image_path = ?", [str(secret), other])
    con.close()
    return db


@pytest.fixture
def app(broken, monkeypatch):
    monkeypatch.setenv("JUDGE_AUDIT_DB", str(broken))
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(broken.parent / "data"))
    st.cache_data.clear()
    st.cache_resource.clear()

    def run(page: str, **params: str) -> AppTest:
        at = open_app({"page": page, **params})
        shown = [e.value for e in [*at.markdown, *at.caption, *at.text, *at.error, *at.warning, *at.info]]
        assert not any(str(broken.parent) in text for text in shown)  # no server path on the page
        return at

    return run


def test_image_problem_names_why_without_the_path(broken):
    con = duckdb.connect(str(broken), read_only=True)
    paths = dict(con.execute("SELECT candidate_id, image_path FROM candidates").fetchall())
    con.close()
    problems = {cid: draw.image_problem(path) for cid, path in paths.items() if cid.startswith(POOL)}
    assert sorted(problems.values()) == ["image file missing", "unreadable image", "unreadable image"]
    assert draw.image_problem(None) == "no image"
    assert draw.image_problem(paths["p000_SD35"]) is None
    assert draw.image_note(list(paths.values())) == "3 images not shown: 2 unreadable image, 1 image file missing"
    assert draw.image_note([paths["p000_SD35"], None]) is None  # a candidate without an image is not a problem
    tile = draw.framed(paths[f"{POOL}_SD35"], 64, [], False, "SD35")
    assert isinstance(tile, Image.Image) and tile.size == (64 + 2 * draw.FRAME, 64 + 2 * draw.FRAME)


def test_explorer_shows_placeholders_and_goes_on(app):
    at = app("explorer", q="number 2")
    assert at.title[0].value == "Prompt explorer"
    captions = [c.value for c in at.caption]
    assert "3 images not shown: 2 unreadable image, 1 image file missing" in captions
    assert len(at.get("image")) == 1 and len(at.get("page_link")) == 1  # the pool strip is drawn


def test_detail_labels_each_unshown_image_and_draws_the_rest(app):
    at = app("detail", prompt=POOL)
    cells = [c.value for c in at.caption if c.value.startswith("**")]
    assert len(cells) == 9  # 3 orders × 3 slots
    assert sum("unreadable image" in c for c in cells) == 6 and sum("image file missing" in c for c in cells) == 3
    assert any(d for d in at.dataframe if "policy" in d.value.columns)  # the page went on to the gates


def test_unexpected_error_is_one_line_without_its_message(app, broken, monkeypatch):
    def failing(*args, **kwargs):
        raise RuntimeError(f"cannot read {broken.parent}/private/file")

    monkeypatch.setattr(browse, "pool_tiles", failing)
    at = app("explorer")
    (error,) = at.error
    assert error.value.startswith("This page stopped on an unexpected error (RuntimeError)")
    assert "private" not in error.value
