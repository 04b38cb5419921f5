"""`runners.audits.run_audits` with a large-study audit made elsewhere (`large=`, what `--engine ray` gives):
the study is not loaded, the audit is the local one's, and an unknown `--by` column is refused before the
audit is asked for (at ten million prompts, the copy into partitions takes minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_core.errors import InputError
from audit_core.selection import audit
from audit_core.selection.partials import SUM_TOLERANCE
from audit_core.selection.partitioned import LocalWorkers, PartitionWorker, audit_partitions
from audit_core.stats.resampling import Resampling
from audit_core.store import audit_cache
from audit_core.store.partitions import export_store
from benchmarks.synthetic import build_synthetic_db
from runners.audits import run_audits
from tests.support.frames import assert_frames_close


@pytest.fixture
def large_study(tmp_path, monkeypatch) -> tuple[Path, str]:
    """A generated study of 120 prompts that counts as large (the Poisson threshold lowered to 0)."""
    monkeypatch.setattr(audit, "POISSON_ABOVE", 0)
    db = tmp_path / "syn.duckdb"
    return db, build_synthetic_db(db, n_prompts=120, seed=2, dataset_id="syn")


def in_partitions(folder: Path, asked: list):
    """A large-study audit over 3 partitions in this process, recording each call."""

    def audit_large(db, dataset, n_prompts, resampling, pool, by):
        asked.append(n_prompts)
        parts = export_store(db, dataset, folder, 3)
        return audit_partitions(LocalWorkers([PartitionWorker(p, pool) for p in parts]), dataset, resampling, by)

    return audit_large


def test_a_large_study_audited_elsewhere_is_not_loaded_and_gets_the_local_tables(large_study, tmp_path):
    db, dataset = large_study
    asked: list = []
    elsewhere = run_audits(db, dataset, Resampling(100, 1), large=in_partitions(tmp_path / "parts", asked),
                           image_paths=False)
    assert asked == [120] and elsewhere.data is None and elsewhere.result is not None
    audit_cache.cache_folder(db).rename(tmp_path / "first-cache")  # the local audit must not read it back
    here = run_audits(db, dataset, Resampling(100, 1), image_paths=False)
    assert here.data is not None
    for name, frame in here.result.tables().items():
        assert_frames_close(elsewhere.result.tables()[name], frame, SUM_TOLERANCE, name)


def test_an_unknown_slice_column_is_refused_before_the_audit_is_asked_for(large_study, tmp_path):
    db, dataset = large_study
    asked: list = []
    with pytest.raises(InputError, match="'nope' is not a prompt attribute"):
        run_audits(db, dataset, Resampling(100, 1), by=["nope"], large=in_partitions(tmp_path / "parts", asked))
    assert asked == []


def test_cache_only_loads_the_study_here(large_study, tmp_path):
    db, dataset = large_study
    asked: list = []
    kept = run_audits(db, dataset, Resampling(100, 1), large=in_partitions(tmp_path / "parts", asked), picks=True)
    assert asked == [] and kept.data is not None and kept.data.n_prompts == 120
