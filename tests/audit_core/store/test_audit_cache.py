"""The audit results cache beside the database: exact round trips, keys that follow the data, no trust in files."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, store
from audit_core.ingest.culturalframes import file_stem
from audit_core.selection.audit import SelectionAudit
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.selection.judge_change import Disagreement, JudgeChange, VerdictRule, compare_judges, pair_judges
from audit_core.store import audit_cache
from audit_core.store.records import utc_now
from benchmarks.synthetic import build_synthetic_db
from runners import analyze, audits, report
from tests.support.cache import assert_same_result, read_manifest, sign_manifest, study_with_audit
from tests.support.selection_data import random_data

DATASET = "small"
RESAMPLES = 200


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, SelectionAudit, dict]:
    return study_with_audit(tmp_path_factory.mktemp("cache") / "study.duckdb", DATASET, 60, RESAMPLES)


def _key(db: Path, dataset: str = DATASET) -> dict:
    con = store.connect(db, read_only=True)
    try:
        content = audit_cache.dataset_fingerprint(con, dataset)
        return audit_cache.selection_key(content, dataset, Resampling(RESAMPLES, 0), "all")
    finally:
        con.close()


def test_a_hit_returns_the_tables_that_were_stored(built) -> None:
    db, result, key = built
    assert audit_cache.load(db, key, SelectionAudit) is None
    assert audit_cache.store(db, key, result) is None
    assert (db.parent / "study_cache").is_dir()
    assert_same_result(audit_cache.load(db, key, SelectionAudit), result)
    other = {**key, "resamples": RESAMPLES + 1}  # another parameter: another entry
    assert audit_cache.load(db, other, SelectionAudit) is None


def test_the_key_follows_recorded_runs_and_ingests_only_of_its_dataset(tmp_path) -> None:
    db = tmp_path / "study.duckdb"
    build_synthetic_db(db, n_prompts=30, dataset_id=DATASET)
    build_synthetic_db(db, n_prompts=30, dataset_id="other")
    keys = [_key(db)]

    def write(action) -> None:
        con = store.connect(db)
        try:
            action(con)
        finally:
            con.close()
        keys.append(_key(db))

    # a run starts, records a call, finishes
    write(lambda con: store.insert_frame(con, "runs", pd.DataFrame([{
        "run_id": "late", "dataset_id": DATASET, "judge": "late", "kind": "selector", "backend": "simulated",
        "status": "running", "model": "m", "model_revision": None, "instruction_sha256": None,
        "manifest_sha256": None, "config_json": None, "started_at": utc_now(), "finished_at": None}])))

    def record(con) -> None:
        call = con.execute("SELECT * FROM calls WHERE run_id = ? LIMIT 1", [f"{DATASET}:steady"]).df()
        call["run_id"], call["request_key"] = "late", "late:0"
        store.insert_frame(con, "calls", call)

    write(record)
    write(lambda con: con.execute("UPDATE runs SET status = 'finished', finished_at = ? WHERE run_id = 'late'",
                                  [utc_now()]))
    before_other = _key(db, "other")
    build_synthetic_db(db, n_prompts=30, seed=1, dataset_id=DATASET)  # an ingest replacing the dataset
    keys.append(_key(db))
    assert len({k["content"] for k in keys}) == len(keys)
    assert _key(db, "other") == before_other  # writes to one dataset leave the other's key alone
    assert _key(db) == keys[-1]  # reading changes nothing


def test_loaded_arrays_round_trip_without_pickle(built) -> None:
    db, _, _ = built
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, DATASET)
        key = audit_cache.data_key(audit_cache.dataset_fingerprint(con, DATASET), DATASET, "all")
    finally:
        con.close()
    assert audit_cache.store(db, key, data) is None
    again = audit_cache.load(db, key, SelectionData)
    pd.testing.assert_frame_equal(again.prompts, data.prompts, check_exact=True)
    for field in dataclasses.fields(SelectionData):
        x, y = getattr(data, field.name), getattr(again, field.name)
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for k in x:
                assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f"), k
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), field.name
    assert again.judges == data.judges


def test_an_unwritable_folder_keeps_nothing_and_breaks_nothing(built, tmp_path) -> None:
    _, result, key = built
    db = tmp_path / "study.duckdb"
    (tmp_path / "study_cache").write_text("a file where the folder would go")
    assert audit_cache.store(db, key, result) is not None
    calls = []
    again, problem = audit_cache.cached(db, key, SelectionAudit, lambda: calls.append(1) or result)
    assert again is result and calls == [1] and problem


def test_a_tampered_entry_is_ignored_and_never_executed(built, tmp_path) -> None:
    _, result, key = built
    db = tmp_path / "study.duckdb"
    assert audit_cache.store(db, key, result) is None
    entry = next((tmp_path / "study_cache" / DATASET).iterdir())
    manifest = read_manifest(entry)

    # a pickle in place of a table, even with the manifest's hash updated and signed with this
    # installation's own key: read as Parquet, refused
    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    gates = entry / manifest["fields"]["gates"]["file"]
    gates.write_bytes(pickle.dumps(Payload()))
    manifest["fields"]["gates"].update(sha256=hashlib.sha256(gates.read_bytes()).hexdigest(),
                                       bytes=gates.stat().st_size)
    sign_manifest(entry, manifest)
    assert audit_cache.load(db, key, SelectionAudit) is None
    assert not marker.exists()

    # a table changed behind the manifest's back: its hash no longer matches
    assert audit_cache.store(db, key, result) is None  # the entry's manifest is this installation's: replaced
    policies = entry / read_manifest(entry)["fields"]["policies"]["file"]
    frame = pd.read_parquet(policies)
    frame.loc[0, "regret"] = -1.0
    frame.to_parquet(policies)
    assert audit_cache.load(db, key, SelectionAudit) is None

    # a manifest for other fields, another class or key, or naming a file elsewhere, even signed
    assert audit_cache.store(db, key, result) is None
    good = read_manifest(entry)
    outside = tmp_path / "outside.parquet"
    result.policies.to_parquet(outside)
    elsewhere = {**good["fields"]["policies"], "file": "../../../outside.parquet",
                 "sha256": hashlib.sha256(outside.read_bytes()).hexdigest(), "bytes": outside.stat().st_size}
    for bad in ({**good, "fields": {**good["fields"], "extra": {"type": "json", "value": 1}}},
                {**good, "fields": {**good["fields"], "policies": elsewhere}},
                {**good, "class": "RatingAudit"}, {**good, "key": {**key, "seed": 1}}):
        sign_manifest(entry, bad)
        assert audit_cache.load(db, key, SelectionAudit) is None

    # not a manifest at all: ignored, never executed, and left in place as not this installation's
    (entry / "manifest.json").write_bytes(pickle.dumps(Payload()))
    assert audit_cache.load(db, key, SelectionAudit) is None
    assert audit_cache.store(db, key, result) is not None
    assert (entry / "manifest.json").read_bytes() == pickle.dumps(Payload())
    assert not marker.exists()


def test_a_judge_change_round_trips_with_its_nested_dataclasses(tmp_path) -> None:
    """Its tables exactly; its disagreement, verdict rule and resampling as the same frozen dataclasses, each
    written field by field and read back as the class its field's annotation names."""
    data = random_data(80, judges=("a", "b", "c"))
    change = compare_judges(pair_judges(data, "a", "b"), resampling=Resampling(100, 3),
                            rule=VerdictRule(filters_rejected_lo_at_most=0.01, discards_rejected_lo_above=0.02))
    db = tmp_path / "study.duckdb"
    key = audit_cache.judge_change_key("content", data.dataset_id, change.resampling, "all", "a", "b")
    assert audit_cache.load(db, key, JudgeChange) is None
    assert audit_cache.store(db, key, change) is None
    again = audit_cache.load(db, key, JudgeChange)
    assert_same_result(again, change)
    assert (type(again.disagreement), type(again.rule), type(again.resampling)) == (Disagreement, VerdictRule,
                                                                                     Resampling)
    assert again.disagreement.n > 0 and again.tables().keys() == change.tables().keys()

    # a nested dataclass whose manifest names another class, other fields or values its class refuses, even
    # signed with this installation's key: a miss, never another class than the field's annotation names
    entry = next((tmp_path / "study_cache" / file_stem(data.dataset_id)).iterdir())
    good = read_manifest(entry)
    rule = good["fields"]["rule"]
    assert rule["type"] == "dataclass" and rule["class"] == "VerdictRule"
    nan = {"type": "json", "value": float("nan")}
    for bad in ({**rule, "class": "Resampling"}, {**rule, "class": "Popen"}, good["fields"]["disagreement"],
                {**rule, "fields": {"filters_rejected_lo_at_most": rule["fields"]["filters_rejected_lo_at_most"]}},
                {**rule, "fields": {**rule["fields"], "discards_rejected_lo_above": nan}}):
        sign_manifest(entry, {**good, "fields": {**good["fields"], "rule": bad}})
        assert audit_cache.load(db, key, JudgeChange) is None
    sign_manifest(entry, good)
    assert audit_cache.load(db, key, JudgeChange) is not None


def test_analyze_fills_the_cache_and_then_reads_it(tmp_path, monkeypatch, capsys) -> None:
    db = tmp_path / "study.duckdb"
    build_synthetic_db(db, n_prompts=30, dataset_id=DATASET)
    args = ["--db", str(db), "--dataset", DATASET, "--resamples", "50"]
    assert analyze.main([*args, "--cache-only"]) == 0
    assert not list(tmp_path.glob("*.csv"))

    def fail(*_, **__):
        raise AssertionError("audited again")

    monkeypatch.setattr(audits, "audit_selection", fail)
    assert analyze.main([*args, "--out", str(tmp_path / "out")]) == 0  # unchanged dataset: from the cache
    assert report.load_report(db, DATASET, Resampling(50, 0), "all").result is not None  # the report reads the same cache
    cached = pd.read_csv(tmp_path / "out" / "policies.csv")
    assert len(cached) > 0 and "regret_lo" in cached
    with pytest.raises(SystemExit) as stop:
        analyze.main(["--db", str(db), "--dataset", DATASET])
    assert stop.value.code == 2 and "--out" in capsys.readouterr().err
