"""Studies the partition tests cut up (`store.partitions`, `selection.partitioned`), each as (database, dataset),
built once per module: the demo (24 prompts of 3 or 4 images, votes, rankings and label probabilities), a
generated study (300 prompts, 3 judges × 3 orders, a scorer) and the published JudgeActs main split."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.synthetic import build_synthetic_db
from runners.demo import build_demo
from tests.support.judgeacts import ingest_main_split


@pytest.fixture(scope="module")
def demo_study(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo(db, n_prompts=24, progress=False)
    return db, "demo"


@pytest.fixture(scope="module")
def synthetic_study(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("synthetic") / "syn.duckdb"
    build_synthetic_db(db, n_prompts=300, seed=3, dataset_id="syn")
    return db, "syn"


@pytest.fixture(scope="module")
def judgeacts_study(tmp_path_factory) -> tuple[Path, str]:
    return ingest_main_split(tmp_path_factory.mktemp("main") / "main.duckdb"), "main"


@pytest.fixture(params=["demo_study", "synthetic_study", "judgeacts_study"])
def study(request) -> tuple[Path, str]:
    """Each of the three studies in turn."""
    return request.getfixturevalue(request.param)
