"""The selection audit of a study held in partitions (`partitioned.audit_partitions`, workers in this process)
writes the whole-study audit's tables: on the built-in demo (votes, rankings, label probabilities), a generated
study and the published JudgeActs main split, in 1, 3 and 7 partitions of the store. Both run the large-study
scheme (the Poisson threshold lowered to 0): text, counts, picks and cut points exactly, numbers within
partials.SUM_TOLERANCE (the Poisson sums run in float32 within a chunk, and the chunks fall otherwise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_core import store
from audit_core.errors import InputError
from audit_core.selection import audit
from audit_core.selection.audit import audit_selection
from audit_core.selection.partials import SUM_TOLERANCE
from audit_core.selection.partitioned.audit import LocalWorkers, audit_partitions
from audit_core.selection.partitioned.worker import PartitionWorker
from audit_core.stats.resampling import Resampling
from audit_core.store.partitions import export_store
from tests.support.debiased import stored_calls
from tests.support.frames import assert_frames_close

RESAMPLING = Resampling(200, 3)


def partitioned(db: Path, dataset: str, folder: Path, count: int) -> LocalWorkers:
    """Workers on `count` partitions of the dataset, exported into `folder`."""
    return LocalWorkers([PartitionWorker(part) for part in export_store(db, dataset, folder, count)])


def call_texts(db: Path, dataset: str):
    con = store.connect(db, read_only=True)
    try:
        return store.load_call_texts(con, dataset)
    finally:
        con.close()


@pytest.mark.parametrize("count", [1, 3, 7])
def test_a_study_in_partitions_gets_the_whole_studys_tables(study, count, tmp_path, monkeypatch):
    db, dataset = study
    monkeypatch.setattr(audit, "POISSON_ABOVE", 0)
    data, ordered = stored_calls(db, dataset)
    by = ["split"] if "split" in data.prompts.columns else []
    texts = call_texts(db, dataset)
    whole = audit_selection(data, RESAMPLING, by, ordered=ordered, call_texts=texts)
    parted = audit_partitions(partitioned(db, dataset, tmp_path, count), dataset, RESAMPLING, by)
    tables = whole.tables()
    assert list(parted.tables()) == list(tables)
    for name, frame in tables.items():
        assert_frames_close(parted.tables()[name], frame, SUM_TOLERANCE, name)
    assert parted.slice_prompts == whole.slice_prompts and parted.notes == whole.notes


def test_an_unknown_slice_column_is_refused_before_any_pass(synthetic_study, tmp_path):
    db, dataset = synthetic_study
    workers = partitioned(db, dataset, tmp_path, 2)
    with pytest.raises(InputError, match="'nope' is not a prompt attribute"):
        audit_partitions(workers, dataset, RESAMPLING, ["nope"])
    assert all(not worker.ordered for worker in workers.workers)  # no pass ran: the calls were never loaded
