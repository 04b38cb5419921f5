"""Stores the campaign tests share: tiny pools (tests/support/pools.py), the same with gold labels, and the
published main split with its two judges (gates and differing picks), each written once per module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit_core import store
from tests.support.judgeacts import ingest_main_split
from tests.support.labels import write_label_dataset
from tests.support.pools import write_tiny_dataset


@pytest.fixture(scope="module")
def tiny_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    write_tiny_dataset(root / "tiny.duckdb", root / "images", n_prompts=8)
    return root / "tiny.duckdb"


@pytest.fixture
def tiny_db(tiny_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of dataset `tiny`: 8 prompts of 3 or 4 candidates, alignment pool `all` without votes."""
    return Path(shutil.copy(tiny_template, tmp_path / "tiny.duckdb"))


@pytest.fixture
def con(tiny_db: Path):
    connection = store.connect(tiny_db)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def labels_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("labels")
    write_label_dataset(root / "labels.duckdb", root / "images", n_prompts=4)
    return root / "labels.duckdb"


@pytest.fixture
def labels_con(labels_template: Path, tmp_path: Path):
    """A fresh copy of the gold-labelled dataset `tiny` (default taxonomy) on an open connection."""
    connection = store.connect(shutil.copy(labels_template, tmp_path / "labels.duckdb"))
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def main_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The published main split (`qwen`, `smol`, `clip`) as dataset `main`; tests only read it."""
    return ingest_main_split(tmp_path_factory.mktemp("main") / "main.duckdb")
