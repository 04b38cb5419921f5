"""Which databases the app may open (`app_ui.allowed`), and the refusal of anything else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from app_ui import allowed
from app_ui.allowed import Allowance, Refused
from audit_core import store
from tests.support.app import APP, build_app_db

# ------------------------------------------------------------ who allowed what


def test_allowance_from_the_command_line_then_the_environment():
    argv = ["--db", "a.duckdb", "-q", "--db", "b/c.duckdb", "--data-dir", "store", "tests/x.py"]
    env = {"JUDGE_AUDIT_DB": "/srv/e.duckdb", "JUDGE_AUDIT_DATA_DIR": "elsewhere"}
    assert allowed.allowance(argv, env) == Allowance((Path("a.duckdb"), Path("b/c.duckdb"), Path("/srv/e.duckdb")), Path("store"))
    assert allowed.allowance([], env) == Allowance((Path("/srv/e.duckdb"),), Path("elsewhere"))
    assert allowed.allowance(["--dbx", "z.duckdb", "--d", "q"], {}) == Allowance((), Path("data"))  # no abbreviations


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A working folder with data/ holding databases, other files and symlinks, and files outside it."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "images").mkdir()
    for path in (data / "demo.duckdb", data / "sub" / "x.duckdb", tmp_path / "outside.duckdb", tmp_path / "other" / "ja.duckdb"):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")  # listing never opens a file: any content will do
    (data / "notes.txt").write_text("not a database")
    (data / "images" / "a.png").write_bytes(b"")
    (data / "folder.duckdb").mkdir()
    (data / "out.duckdb").symlink_to(tmp_path / "outside.duckdb")  # points out of the data folder
    (data / "passwd.duckdb").symlink_to("/etc/passwd")
    (data / "alias.duckdb").symlink_to(data / "sub" / "x.duckdb")  # a second name for an allowed file
    (data / "text.duckdb").symlink_to(data / "notes.txt")  # inside, but not a .duckdb file
    (data / "loop.duckdb").symlink_to(data / "loop.duckdb")
    return tmp_path


def test_data_folder_lists_only_its_own_duckdb_files(tree):
    found = allowed.databases(Allowance((), Path("data")))
    assert found == {"demo.duckdb": tree / "data" / "demo.duckdb", "alias.duckdb": tree / "data" / "sub" / "x.duckdb"}
    assert allowed.default_name(found, Allowance((), Path("data"))) == "demo.duckdb"


def test_named_files_come_first_and_keep_distinct_names(tree):
    allowance = Allowance((Path("other/ja.duckdb"), Path("data/sub/x.duckdb"), Path("gone/demo.duckdb")), Path("data"))
    found = allowed.databases(allowance)
    assert list(found) == ["ja.duckdb", "sub/x.duckdb", "demo.duckdb", "demo.duckdb (2)"]
    assert found["demo.duckdb"] == tree / "gone" / "demo.duckdb"  # listed though missing: the page says so
    assert found["demo.duckdb (2)"] == tree / "data" / "demo.duckdb"
    assert allowed.default_name(found, allowance) == "ja.duckdb"


def test_no_database_at_all_has_no_default(tmp_path):
    allowance = Allowance((), tmp_path / "nothing here")
    assert allowed.databases(allowance) == {}
    assert allowed.default_name({}, allowance) is None


def test_values_naming_an_allowed_database(tree):
    found = allowed.databases(Allowance((Path("other/ja.duckdb"),), Path("data")))
    assert allowed.database_name("demo.duckdb", found) == "demo.duckdb"
    assert allowed.database_name("data/demo.duckdb", found) == "demo.duckdb"  # a path, from the working folder
    assert allowed.database_name(str(tree / "data" / "sub" / "x.duckdb"), found) == "alias.duckdb"
    assert allowed.database_name("data/../data/alias.duckdb", found) == "alias.duckdb"
    assert allowed.database_name("other/ja.duckdb", found) == "ja.duckdb"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("/etc/passwd", "only .duckdb databases"),
        ("data/notes.txt", "only .duckdb databases"),
        ("", "only .duckdb databases"),
        ("../outside.duckdb", "leaving the data folder"),
        ("data/../../x.duckdb", "leaving the data folder"),
        ("outside.duckdb", "not one of the databases"),
        ("data/out.duckdb", "not one of the databases"),  # the symlink pointing out
        ("data/passwd.duckdb", "not one of the databases"),
        ("data/text.duckdb", "not one of the databases"),
        ("data/folder.duckdb", "not one of the databases"),
        ("data/loop.duckdb", "not one of the databases"),
        ("data/missing.duckdb", "not one of the databases"),
        ("sub/x.duckdb", "not one of the databases"),  # a name is listed as shown, not guessed
        ("a\0b.duckdb", "not one of the databases"),
    ],
)
def test_values_refused(tree, value, reason):
    found = allowed.databases(Allowance((Path("other/ja.duckdb"),), Path("data")))
    with pytest.raises(Refused, match=reason):
        allowed.database_name(value, found)


# ------------------------------------------------------------ the app


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """data/app.duckdb (allowed, the default) and a real store outside the data folder, reachable
    from data/sub as ../x.duckdb (a symlink pointing out), ../../x.duckdb and x.duckdb (another)."""
    tmp_path = tmp_path_factory.mktemp("allowed")
    data = tmp_path / "data"
    build_app_db(data / "app.duckdb", data / "images", n_prompts=4)
    outside = build_app_db(tmp_path / "x.duckdb", tmp_path / "images", n_prompts=4, images=False)
    (data / "sub").mkdir()
    (data / "sub" / "x.duckdb").symlink_to(outside)
    (data / "x.duckdb").symlink_to(outside)
    return tmp_path


@pytest.fixture
def app_tree(stores, monkeypatch):
    """The app run from data/sub with data/ as its data folder; yields (root, paths store.connect opened)."""
    tmp_path, data = stores, stores / "data"
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(data))
    monkeypatch.delenv("JUDGE_AUDIT_DB", raising=False)
    monkeypatch.chdir(data / "sub")
    opened = []
    real_connect = store.connect

    def recording_connect(path, **kwargs):
        opened.append(str(path))
        return real_connect(path, **kwargs)

    monkeypatch.setattr(store, "connect", recording_connect)
    st.cache_data.clear()  # so that every open shows in `opened`, not only a test's first
    st.cache_resource.clear()
    return tmp_path, opened


@pytest.mark.parametrize("value", ["/etc/passwd", "../x.duckdb", "../../x.duckdb", "x.duckdb", "`<b>x</b>`.duckdb"])
def test_link_to_a_database_not_allowed_is_refused_and_nothing_opened(app_tree, value):
    tmp_path, opened = app_tree
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"db": value, "page": "explorer"})
    at.run()
    assert not at.exception
    (error,) = at.error
    shown = "`" + value.replace("`", "'") + "`"  # a code span: shown literally, HTML included
    assert error.value.startswith(f"This link names the database {shown}, which this app may not open")
    assert "Nothing was opened" in error.value and str(tmp_path) not in error.value
    assert opened == []
    assert not at.title  # no page was drawn
    assert at.sidebar.selectbox(key="db").options == ["app.duckdb"]
    assert "db" not in at.query_params

    at.sidebar.selectbox(key="db").set_value("app.duckdb").run()  # the page goes on with an allowed database
    assert not at.exception and at.title[0].value == "Prompt explorer"
    assert opened and all(Path(p).name == "app.duckdb" for p in opened)


def test_link_by_path_to_an_allowed_database_opens_it_by_name(app_tree):
    tmp_path, opened = app_tree
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"db": "../app.duckdb", "page": "explorer"})
    at.run()
    assert not at.exception and not at.error
    assert at.sidebar.selectbox(key="db").value == "app.duckdb"
    assert {Path(p).resolve() for p in opened} == {tmp_path / "data" / "app.duckdb"}
    assert not any(str(tmp_path) in m.value for m in [*at.markdown, *at.caption])  # no server path on the page


def test_command_line_names_the_databases(tmp_path, monkeypatch):
    first = build_app_db(tmp_path / "one" / "first.duckdb", tmp_path / "img1", n_prompts=4, images=False)
    second = build_app_db(tmp_path / "two" / "second.duckdb", tmp_path / "img2", n_prompts=4, images=False)
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("JUDGE_AUDIT_DB", raising=False)
    monkeypatch.setattr("sys.argv", ["app.py", "--db", str(first), "--db", str(second)])
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"db": "second.duckdb", "page": "explorer"})
    at.run()
    assert not at.exception and not at.error
    db = at.sidebar.selectbox(key="db")
    assert db.options == ["first.duckdb", "second.duckdb"] and db.value == "second.duckdb"
    links = [link.proto.query_string for link in at.get("page_link")]
    assert links and all("db=second.duckdb" in q for q in links)
    assert os.fspath(tmp_path) not in " ".join(links)
