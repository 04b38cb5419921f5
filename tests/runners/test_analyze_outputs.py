"""runners.analyze writes every table the issue contracts name: selection detail, timing and,
on a rating dataset, alignment per reference pool; `--pool` switches the selection utility."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, SelectionAudit, audit_selection, load_selection_data, store
from audit_core.rating.alignment import ALIGNMENT_COLUMNS, TILT_COLUMNS
from audit_core.rating.reliability import RELIABILITY_COLUMNS
from audit_core.selection import browse
from audit_core.selection.debiased import load_ordered_calls
from audit_core.selection.policies import PolicyPicks
from audit_core.selection.timing import timing_table
from audit_core.store import audit_cache
from audit_core.store.schema import DEFAULT_POOL
from benchmarks.synthetic import build_synthetic_db
from runners import analyze
from runners.demo import build_demo
from runners.demo.ratings import DATASET as RATING_DATASET
from runners.demo.ratings import build_rating_demo
from runners.ingest import main as ingest_main

SELECTION_TABLES = ("policies", "judges", "positions", "generators", "generator_slots", "flips_by_range",
                    "flips_by_near_ties", "groups", "cultural", "risk_coverage", "gates", "slices",
                    "composition", "timing")
RATING_TABLES = ("alignment", "tilt", "reliability", "pool_agreement", "wilcoxon")


@pytest.fixture(scope="module")
def selection_db(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("sel") / "synthetic.duckdb"
    build_synthetic_db(path, n_prompts=120, n_judges=2, n_orders=3, seed=4, dataset_id="syn")
    return str(path)


@pytest.fixture(scope="module")
def rating_db(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("rat") / "ratings.duckdb"
    build_rating_demo(path, n_prompts=30, seed=1, progress=False)
    return str(path)


def run(db: str, dataset: str, out: Path, *extra: str) -> int:
    return analyze.main(["--db", db, "--dataset", dataset, "--out", str(out), "--resamples", "100", *extra])


def test_selection_tables_include_detail_and_timing_from_the_recorded_calls(selection_db: str, tmp_path) -> None:
    out = tmp_path / "out"
    assert run(selection_db, "syn", out) == 0
    for name in SELECTION_TABLES:
        assert (out / f"{name}.csv").is_file(), name
    for name in RATING_TABLES:
        assert not (out / f"{name}.csv").exists(), name  # no rating data, no rating tables
    timing = pd.read_csv(out / "timing.csv")
    con = store.connect(selection_db, read_only=True)
    calls = store.load_calls(con, "syn")
    con.close()
    expected = timing_table(calls)
    assert timing["judge"].tolist() == expected["judge"].tolist()
    assert timing["calls"].tolist() == calls.groupby("judge").size().tolist()
    slots = pd.read_csv(out / "generator_slots.csv")
    assert list(slots.columns) == ["judge", "generator", "slot", "presented", "chosen", "rate"]
    ties = pd.read_csv(out / "flips_by_near_ties.csv")
    assert list(ties.columns) == ["judge", "near_ties", "prompts", "parsed", "flip_rate", "flip_rate_lo", "flip_rate_hi"]
    summary = json.loads((out / "summary.json").read_text())
    assert "alignment" not in summary


def test_rating_dataset_gets_alignment_tilt_and_reliability_per_pool(rating_db: str, tmp_path) -> None:
    out = tmp_path / "out"
    assert run(rating_db, RATING_DATASET, out) == 0
    alignment = pd.read_csv(out / "alignment.csv")
    assert list(alignment.columns[: len(ALIGNMENT_COLUMNS)]) == list(ALIGNMENT_COLUMNS)
    assert set(alignment["pool"]) == {"a", "b"}  # every pool reported, never one agreement number
    assert list(pd.read_csv(out / "tilt.csv").columns[: len(TILT_COLUMNS)]) == list(TILT_COLUMNS)
    assert list(pd.read_csv(out / "reliability.csv").columns) == list(RELIABILITY_COLUMNS)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["alignment"]) == len(alignment)
    assert {row["pool"] for row in summary["reliability"]} == {"a", "b"}
    assert summary["rating"]["scale"] == [1, 5] and summary["rating"]["resamples"] == 100


def test_pool_option_takes_that_pools_consensus_as_the_utility(rating_db: str, tmp_path, capsys) -> None:
    utilities = {}
    for pool in ("all", "a", "b"):
        out = tmp_path / pool
        assert run(rating_db, RATING_DATASET, out, "--pool", pool) == 0
        oracle = pd.read_csv(out / "policies.csv").set_index("policy").loc["oracle", "utility"]
        utilities[pool] = oracle
    con = store.connect(rating_db, read_only=True)
    for pool in ("a", "b"):
        values = con.execute(
            "SELECT prompt_id, max(value) FROM ratings JOIN candidates USING (dataset_id, candidate_id) "
            "WHERE dataset_id = ? AND outcome = 'alignment' AND pool = ? GROUP BY prompt_id",
            [RATING_DATASET, pool],
        ).fetchall()
        assert utilities[pool] == pytest.approx(sum(v for _, v in values) / len(values))
    con.close()
    assert run(rating_db, RATING_DATASET, tmp_path / "zz", "--pool", "zz") == 2
    err = capsys.readouterr().err
    assert "pool 'zz'" in err and "a, all, b" in err


def test_a_rubric_only_study_from_the_table_contract_gets_the_rating_audit_alone(tmp_path, capsys) -> None:
    from tests.support.rating_tables import pool_rows, rating_rows, vote_rows
    from tests.support.tables import write_table

    db = tmp_path / "study.duckdb"
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    votes = write_table(tmp_path / "votes.csv", vote_rows())
    ratings = write_table(tmp_path / "ratings.csv", rating_rows())
    assert ingest_main(["table", "--pools", str(pools), "--votes", str(votes), "--ratings", f"r={ratings}",
                        "--db", str(db), "--dataset", "study"]) == 0
    out = tmp_path / "out"
    assert run(str(db), "study", out) == 0
    assert "no selection audit" in capsys.readouterr().out
    assert not (out / "policies.csv").exists()
    alignment = pd.read_csv(out / "alignment.csv")
    assert set(alignment["pool"]) == {"a", "b"} and set(alignment["condition"]) == {"default", "persona"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policies"] is None and summary["reliability"]
    assert "No selection audit" in (out / "report.md").read_text()


def test_cache_only_keeps_every_policys_picks_for_the_explorer_and_a_plain_run_does_not(tmp_path) -> None:
    db = tmp_path / "demo.duckdb"
    build_demo(db, n_prompts=40, progress=False)
    con = store.connect(db, read_only=True)
    try:
        key = browse.picks_key(audit_cache.dataset_fingerprint(con, "demo"), "demo", DEFAULT_POOL)
        data = load_selection_data(con, "demo")
        expected = browse.every_policy(data, load_ordered_calls(con, data))
    finally:
        con.close()
    assert run(str(db), "demo", tmp_path / "out") == 0
    assert not audit_cache.has(db, key)  # writing the tables does not pay for the explorer's picks
    assert analyze.main(["--db", str(db), "--dataset", "demo", "--resamples", "100", "--cache-only"]) == 0
    assert audit_cache.has(db, key)
    kept = audit_cache.load(db, key, PolicyPicks)
    assert list(kept.picks) == list(expected.picks) and len(kept.picks) > len(data.judges)
    for name, pick in expected.picks.items():
        assert np.array_equal(kept.picks[name], pick), name
    # the audit kept beside them (made from the same policies, fitted once) is the audit of the data
    con = store.connect(db, read_only=True)
    try:
        selection_key = audit_cache.selection_key(audit_cache.dataset_fingerprint(con, "demo"), "demo",
                                                  Resampling(100, 0), DEFAULT_POOL, ())
        calls = store.load_calls(con, "demo", ok_outputs=False)
    finally:
        con.close()
    audited = audit_cache.load(db, selection_key, SelectionAudit)
    assert audited is not None
    for name, frame in audit_selection(data, Resampling(100, 0), calls=calls).tables().items():
        pd.testing.assert_frame_equal(audited.tables()[name], frame, check_dtype=False, obj=name)
