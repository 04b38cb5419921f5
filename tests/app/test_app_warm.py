"""The warm start (`serve.py`'s lifespan, `app_ui.warm`): what the server loads before its first visitor."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pandas as pd
import pytest
import streamlit as st

from app_ui import context, warm
from audit_core import store
from audit_core.store import audit_cache
from tests.support.app import UNEXPECTED, build_app_db, cards, open_app

pytestmark = pytest.mark.usefixtures("data_folder")  # the app may open the test databases (tests/conftest.py)

# the server's lifespan, run as serve.py runs it: the collector's view of the process inside it
LIFESPAN = """import asyncio, gc
from app_ui import warm

async def main():
    async with warm.lifespan(None):
        print(gc.get_freeze_count(), len(gc.get_objects()))

asyncio.run(main())
"""


def test_imported_modules_lists_each_top_level_import_once_in_order(tmp_path):
    first = tmp_path / "first.py"
    first.write_text("from __future__ import annotations\nimport json, os.path\nfrom collections import abc\n"
                     "from . import sibling\n\ndef later():\n    import zlib\n")
    second = tmp_path / "second.py"
    second.write_text("import json\nfrom email.message import Message\nfrom email import message, utils, Charset\n")
    assert warm.imported_modules([first, second]) == \
        ["json", "os.path", "collections", "collections.abc", "email.message", "email", "email.utils"]


def test_the_warm_start_imports_what_app_py_and_every_page_import():
    names = warm.imported_modules(warm.SCRIPTS)
    assert {"app_ui.context", "app_ui.gate_views", "findings.figures", "plotly.graph_objects"} <= set(names)
    assert {p.name for p in warm.SCRIPTS} >= {"app.py", "overview.py", "gates.py", "attributes.py"}


def test_the_default_dataset_is_the_newest_with_selector_judges_else_the_newest():
    newest_first = pd.DataFrame({"dataset_id": ["ratings", "second", "first"], "selectors": [0, 2, 1]})
    assert context.default_dataset(newest_first) == "second"
    assert context.default_dataset(newest_first.assign(selectors=0)) == "ratings"


@pytest.fixture
def db(tmp_path, monkeypatch) -> str:
    """The app's test database, the one the app is started with ($JUDGE_AUDIT_DB), and empty caches."""
    path = str(build_app_db(tmp_path / "warm.duckdb", tmp_path / "images"))
    monkeypatch.setenv("JUDGE_AUDIT_DB", path)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield path
    st.cache_data.clear()
    st.cache_resource.clear()


def test_the_default_view_is_what_a_bare_link_opens(db):
    view = context.default_view(sys.argv[1:], os.environ)
    at = open_app({})
    shown = at.session_state["_selection"]
    assert view == context.DefaultView(shown.db_path, shown.dataset_id, shown.pool, shown.resamples)
    assert (view.dataset_id, view.pool, view.resamples) == ("tiny", "all", 10_000)


def _forbid_loading(monkeypatch) -> None:
    """From here on, reading the audit cache, loading a dataset or auditing one fails."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("loaded on the visit")
    for module, name in ((audit_cache, "load"), (context, "load_selection_data"), (context, "audit_selection")):
        monkeypatch.setattr(module, name, refuse)


def test_after_the_warm_start_the_first_overview_loads_nothing(db, monkeypatch):
    line = warm.warm_start(sys.argv[1:], os.environ)
    assert "selection audit of dataset 'tiny' (10,000 resamples) ready" in line
    _forbid_loading(monkeypatch)
    at = open_app({"page": "overview"})
    assert not [e.value for e in at.error if UNEXPECTED in e.value]
    assert dict(cards(at))["Gain over random"].count("[") == 1


def test_without_the_warm_start_the_first_overview_loads_its_audit(db, monkeypatch):
    _forbid_loading(monkeypatch)  # the check above, without the warm start: the visit must load
    at = open_app({"page": "overview"})
    assert [e.value for e in at.error if UNEXPECTED in e.value]


def test_a_dataset_without_alignment_ratings_warms_its_rating_audit(tmp_path, monkeypatch):
    from tests.support.rating_db import build_rating_db

    path = str(build_rating_db(tmp_path / "rating.duckdb", tmp_path / "images"))
    con = store.connect(path)
    try:
        with store.transaction(con):
            con.execute("DELETE FROM ratings WHERE outcome = 'alignment'")
        (dataset_id,) = con.execute("SELECT dataset_id FROM datasets").fetchone()
    finally:
        con.close()
    monkeypatch.setenv("JUDGE_AUDIT_DB", path)
    assert f"rating audit of dataset {dataset_id!r}" in warm.warm_start(sys.argv[1:], os.environ)
    view = context.default_view(sys.argv[1:], os.environ)
    assert (view.dataset_id, view.pool) == (dataset_id, None)


def test_a_warm_start_with_nothing_to_open_says_so(tmp_path):
    line = warm.warm_start([], {"JUDGE_AUDIT_DATA_DIR": str(tmp_path)})
    assert line.endswith("no database or dataset to preload")


def test_the_lifespan_leaves_the_collector_only_what_the_page_runs_create(db):
    # Streamlit collects every generation after each page run: what the warm start loaded is out of its sight
    run = subprocess.run([sys.executable, "-c", LIFESPAN], cwd=warm.ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "selection audit of dataset 'tiny' (10,000 resamples) ready" in run.stderr
    frozen, tracked = map(int, run.stdout.split())
    assert tracked < frozen / 100


def test_no_page_draws_by_magic():
    # .streamlit/config.toml turns magic off: a bare value on its own line would silently draw nothing
    drawn_by_magic = []
    for script in warm.SCRIPTS:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        for block in ast.walk(tree):
            body = getattr(block, "body", None)
            for i, node in enumerate(body if isinstance(body, list) else []):
                value = node.value if isinstance(node, ast.Expr) else None
                docstring = i == 0 and isinstance(value, ast.Constant) and isinstance(value.value, str)
                if value is not None and not docstring and not isinstance(value, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom)):
                    drawn_by_magic.append(f"{script.name}:{node.lineno}")
    assert drawn_by_magic == []
