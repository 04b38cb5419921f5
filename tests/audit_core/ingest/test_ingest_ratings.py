"""Rating-study data through the table contract: votes, consensus from votes, item attributes, rating judges.

A small rating study built here: three prompts, each with an `east` and a `west`
image, rubric votes (1–5) from pool `a` (three annotators) and pool `b` (two),
and a rating judge's recorded calls. Bad input is refused naming file, line and
column, with exit status 2 and the database as it was.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from statistics import mean

import pandas as pd
import pytest

from audit_core import store
from audit_core.rating.audit import load_rating_data
from runners import ingest
from tests.support.rating_tables import CANDIDATES, CULTURES, pool_rows, rating_rows, vote_rows
from tests.support.snapshots import snapshot
from tests.support.tables import write_table


def run_ingest(db: Path, pools: Path, *extra: str) -> int:
    return ingest.main(["table", "--pools", str(pools), "--db", str(db), "--dataset", "study", *extra])


def expected_consensus(votes: list[dict]) -> dict[tuple[str, str, str], tuple[float, int]]:
    """(candidate, outcome, pool) -> (mean of its votes, their count), by plain Python."""
    cast = defaultdict(list)
    for v in votes:
        cast[v["candidate_id"], v["outcome"], v.get("pool", "all")].append(float(v["value"]))
    return {key: (mean(values), len(values)) for key, values in cast.items()}


def stored_ratings(db: Path) -> dict[tuple[str, str, str], tuple[float, int]]:
    con = store.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT candidate_id, outcome, pool, value, n FROM ratings WHERE dataset_id = 'study'").fetchall()
    finally:
        con.close()
    return {(c, o, p): (v, n) for c, o, p, v, n in rows}


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_votes_only_dataset_loads_with_consensus_the_mean_of_votes(ext, tmp_path, capsys):
    pools = write_table(tmp_path / f"pools.{ext}", pool_rows())
    votes = write_table(tmp_path / f"votes.{ext}", vote_rows())
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, pools, "--votes", str(votes)) == 0
    out = capsys.readouterr().out
    assert "votes: 18 on rubric in pool 'a', 12 on rubric in pool 'b'" in out
    assert "selection audit: no alignment ratings" in out
    stored = stored_ratings(db)
    expected = expected_consensus(vote_rows())
    assert stored.keys() == expected.keys() and len(stored) == 2 * len(CANDIDATES)
    for key, (value, n) in expected.items():
        assert stored[key][0] == pytest.approx(value, abs=1e-12) and stored[key][1] == n
    assert stored["p1_east", "rubric", "a"] == (pytest.approx(13 / 3), 3)  # votes 4, 5, 4
    con = store.connect(db, read_only=True)
    try:
        votes_stored = store.load_votes(con, "study")
        attributes = store.load_candidate_attributes(con, "study")
        data = load_rating_data(con, "study")
    finally:
        con.close()
    assert len(votes_stored) == len(vote_rows())
    assert list(attributes.itertuples(index=False, name=None)) == [(cid, "culture", cid.split("_")[1]) for cid in sorted(CANDIDATES)]
    assert data.pools == ["a", "b"] and set(data.items["culture"]) == set(CULTURES)
    before = snapshot(db)
    assert run_ingest(db, pools, "--votes", str(votes)) == 0  # the same files again change nothing
    assert "pools: unchanged" in capsys.readouterr().out
    assert snapshot(db) == before


def test_given_consensus_wins_and_votes_fill_the_gaps(tmp_path, capsys):
    """Alignment given for some candidates, votes for the rest: every candidate has a utility."""
    rows = pool_rows()
    for row in rows[:4]:
        row["alignment"] = 0.25
    rows[0]["rubric"] = 3  # pool 'all' rubric consensus, given
    votes = [{"candidate_id": cid, "outcome": "alignment", "annotator": f"h{j}", "value": v}
             for cid in CANDIDATES for j, v in enumerate((0.5, 1.0))]  # pool defaults to 'all'
    votes.append({"candidate_id": CANDIDATES[0], "outcome": "rubric", "annotator": "h0", "value": 5})
    db = tmp_path / "store.duckdb"
    pools_file = write_table(tmp_path / "pools.csv", rows)
    assert run_ingest(db, pools_file, "--votes", str(write_table(tmp_path / "votes.csv", votes))) == 0
    assert "selection audit" not in capsys.readouterr().out  # pool 'all' has the utility
    stored = stored_ratings(db)
    for k, cid in enumerate(CANDIDATES):
        assert stored[cid, "alignment", "all"] == ((0.25, None) if k < 4 else (0.75, 2))
    assert stored[CANDIDATES[0], "rubric", "all"] == (3.0, None)  # given row kept though its one vote says 5


def test_named_pools_without_all_load_and_name_the_pools(tmp_path, capsys):
    rows = [dict(row, pool=pool, alignment=0.5) for row in pool_rows() for pool in ("a", "b")]
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, write_table(tmp_path / "pools.csv", rows)) == 0
    assert "selection audit: alignment in pools a, b but not in 'all'; choose one with `runners.analyze --pool NAME`" in (
        capsys.readouterr().out)
    rows[5]["alignment"] = None  # candidate p2_east's row in pool b; the error names the candidate's first row
    bad = write_table(tmp_path / "bad.csv", rows)
    before = snapshot(db)
    assert run_ingest(db, bad) == 2
    err = capsys.readouterr().err
    assert (f"{bad} line 6, field 'alignment': candidate 'p2_east' has no alignment rating in pool 'b' "
            "(5 of 6 candidates have one)") in err, err
    assert snapshot(db) == before


def test_a_table_with_no_rating_and_no_votes_is_refused(tmp_path, capsys):
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, pools) == 2
    assert f"error: {pools}: no ratings and no votes" in capsys.readouterr().err
    assert not db.exists()


# ---------------------------------------------------------------- bad votes


@pytest.fixture(scope="module")
def loaded_db(tmp_path_factory):
    """A store holding the good rating study (pools, votes, one rater); bad input must leave it as it is."""
    folder = tmp_path_factory.mktemp("loaded")
    db = folder / "store.duckdb"
    pools = write_table(folder / "pools.csv", pool_rows())
    votes = write_table(folder / "votes.csv", vote_rows())
    ratings = write_table(folder / "ratings.csv", rating_rows())
    assert run_ingest(db, pools, "--votes", str(votes), "--ratings", f"r={ratings}") == 0
    return db


@pytest.fixture(scope="module")
def loaded_content(loaded_db):
    """The loaded store's content, taken once: every test must leave it so."""
    return snapshot(loaded_db)


def _edited(rows: list[dict], i: int, **changes) -> list[dict]:
    rows[i].update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del rows[i][key]
    return rows


VOTE_CASES = {
    # case: (row index, changes, field, message)
    "unknown candidate": (3, {"candidate_id": "p9_east"}, "candidate_id", "votes for unknown candidate 'p9_east'"),
    "duplicate annotator": (1, {"annotator": "a1"}, "annotator", "annotator 'a1' rated 'p1_east' twice for rubric in pool 'a'"),
    "infinite value": (2, {"value": "inf"}, "value", "expected a finite number"),
    "nan value": (2, {"value": "nan"}, "value", "expected a finite number"),
    "text value": (2, {"value": "good"}, "value", "expected a number"),
    "value above the scale": (4, {"value": 6}, "value", "rubric rating 6.0 of 'p1_east' is off its scale [1, 5]"),
    "value below the scale": (7, {"value": 0.5}, "value", "rubric rating 0.5 of 'p1_west' is off its scale [1, 5]"),
    "missing annotator": (5, {"annotator": None}, "annotator", "missing"),
    "blank annotator": (5, {"annotator": "  "}, "annotator", "a name cannot be blank"),
    "missing value": (0, {"value": None}, "value", "missing"),
    "undeclared outcome": (6, {"outcome": "helpfulness"}, "outcome",
                           "outcome 'helpfulness' has no scale: use one of alignment"),
    "unknown column": (0, {"rater": "x"}, "rater", "unknown column"),
}


def _formats(cases: dict, json_only: set[str]) -> list[tuple[str, str]]:
    """(case, extension) pairs: CSV and JSONL, but JSONL alone for what a CSV cell cannot hold
    (a blank cell is absent there, and every cell is text)."""
    return [(case, ext) for case in sorted(cases) for ext in ("csv", "jsonl") if ext == "jsonl" or case not in json_only]


@pytest.mark.parametrize("case, ext", _formats(VOTE_CASES, {"blank annotator"}))
def test_bad_votes(case, ext, loaded_db, loaded_content, tmp_path, capsys):
    index, changes, field, message = VOTE_CASES[case]
    bad = write_table(tmp_path / f"votes.{ext}", _edited(vote_rows(), index, **changes))
    line = index + 2 if ext == "csv" else index + 1
    assert run_ingest(loaded_db, loaded_db.parent / "pools.csv", "--votes", str(bad)) == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}, field '{field}': " in err and message in err, err
    assert snapshot(loaded_db) == loaded_content


def test_an_outcome_of_your_own_gives_votes_their_scale(tmp_path, capsys):
    votes = [dict(v, outcome="likert7", value=v["value"] + 2) for v in vote_rows()]
    votes_file = write_table(tmp_path / "votes.csv", votes)
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, pools, "--votes", str(votes_file), "--outcome", "likert7=1:7") == 0
    assert stored_ratings(db)["p1_east", "likert7", "a"] == (pytest.approx(19 / 3), 3)
    votes[0]["value"] = 8
    bad = write_table(tmp_path / "bad.csv", votes)
    before = snapshot(db)
    assert run_ingest(db, pools, "--votes", str(bad), "--outcome", "likert7=1:7") == 2
    assert f"{bad} line 2, field 'value': likert7 rating 8.0 of 'p1_east' is off its scale [1, 7]" in capsys.readouterr().err
    assert snapshot(db) == before


# ---------------------------------------------------------------- item attributes


def test_item_attributes_agree_across_a_candidates_rows(tmp_path, capsys):
    rows = [dict(row, pool=pool, rubric=3, item_region="north") for row in pool_rows() for pool in ("a", "b")]
    rows[2]["item_region"] = ""  # blank: p1_west has no region, in both of its rows
    rows[3]["item_region"] = None
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, write_table(tmp_path / "pools.jsonl", rows)) == 0
    con = store.connect(db, read_only=True)
    try:
        attributes = store.load_candidate_attributes(con, "study")
    finally:
        con.close()
    assert len(attributes) == 2 * len(CANDIDATES) - 1
    assert "p1_west" not in set(attributes.loc[attributes["attribute"] == "region", "candidate_id"])
    cases = {
        # (row index, column, value): message
        (1, "item_culture", "west"): "candidate 'p1_east' has 'east' on line 1 but 'west' here",
        (5, "item_region", None): "candidate 'p2_east' has 'north' on line 5 but None here",
        (0, "item_culture", 7): "expected text, got 7",
        (0, "item_", "x"): "unknown column",
        (0, "item-size", "x"): "unknown column",
    }
    for (index, column, value), message in cases.items():
        bad_rows = json.loads(json.dumps(rows))
        bad_rows[index][column] = value
        bad = write_table(tmp_path / "bad.jsonl", bad_rows)
        before = snapshot(db)
        assert run_ingest(db, bad) == 2, column
        err = capsys.readouterr().err
        assert f"{bad} line {index + 1}, field '{column}': {message}" in err, err
        assert snapshot(db) == before


# ---------------------------------------------------------------- rating judges


def test_ratings_round_trip_through_load_rating_calls(loaded_db, loaded_content, tmp_path, capsys):
    con = store.connect(loaded_db, read_only=True)
    try:
        calls = store.load_rating_calls(con, "study").set_index(["candidate_id", "condition"])
        runs = store.load_runs(con, "study")
        data = load_rating_data(con, "study")
    finally:
        con.close()
    expected = {  # (candidate, condition): (status, rating, raw_output, attempts)
        ("p1_east", "default"): ("ok", 4.0, "4", 1),
        ("p1_west", "persona"): ("ok", 2.0, "2", 2),
        ("p2_east", "default"): ("abstained", None, "unspecified", 1),
        ("p2_west", "default"): ("parse_fail", None, "It is lovely.", 1),
        ("p3_east", "default"): ("runtime_fail", None, None, 1),
        ("p3_east", "persona"): ("ok", 5.0, None, 1),
    }
    assert sorted(calls.index) == sorted(expected)
    for key, (status, rating, raw, attempts) in expected.items():
        row = calls.loc[key]
        assert row["judge"] == "r" and row["status"] == status and row["attempts"] == attempts
        assert (None if pd.isna(row["rating"]) else row["rating"]) == rating
        assert (row["raw_output"] if isinstance(row["raw_output"], str) else None) == raw
    assert calls.loc[("p1_east", "default"), "seconds"] == 0.5
    assert calls.loc[("p1_west", "persona"), "parse_note"] == "bare integer"
    assert calls["request_key"].is_unique
    (run,) = runs.itertuples(index=False)
    assert (run.kind, run.backend, run.status) == ("rater", "import", "imported")
    config = json.loads(run.config_json)
    assert config["outcome"] == "rubric" and config["scale"] == [1, 5]
    assert data.scale == (1, 5) and data.raters == [("r", "default"), ("r", "persona")]
    # the same file again: unchanged; another file under the same name: refused unless --replace
    pools, votes = loaded_db.parent / "pools.csv", loaded_db.parent / "votes.csv"
    before = loaded_content
    assert run_ingest(loaded_db, pools, "--votes", str(votes), "--ratings", f"r={loaded_db.parent / 'ratings.csv'}") == 0
    assert "rater r: unchanged, 6 ratings of rubric" in capsys.readouterr().out
    assert snapshot(loaded_db) == before
    other = write_table(tmp_path / "other.csv", rating_rows()[:2])
    assert run_ingest(loaded_db, pools, "--votes", str(votes), "--ratings", f"r={other}") == 2
    assert "judge 'r' already has recorded calls" in capsys.readouterr().err
    assert snapshot(loaded_db) == before


def test_replacing_a_raters_file(tmp_path, capsys):
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    votes = write_table(tmp_path / "votes.csv", vote_rows())
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, pools, "--votes", str(votes), "--ratings", f"r={write_table(tmp_path / 'r.csv', rating_rows())}") == 0
    other = write_table(tmp_path / "other.jsonl", rating_rows()[:2])
    assert run_ingest(db, pools, "--votes", str(votes), "--ratings", f"r={other}", "--replace") == 0
    assert "rater r: replaced, 2 ratings" in capsys.readouterr().out
    con = store.connect(db, read_only=True)
    try:
        assert len(store.load_rating_calls(con, "study")) == 2 and len(store.load_runs(con, "study")) == 1
    finally:
        con.close()


RATING_CASES = {
    # case: (row index, changes, field, message)
    "unknown candidate": (1, {"candidate_id": "p7_east"}, "candidate_id", "unknown candidate id 'p7_east'"),
    "duplicate call": (4, {"condition": "default", "candidate_id": "p1_east"}, "candidate_id",
                       "duplicate call: candidate 'p1_east' under condition 'default' was already recorded on line"),
    "rating above the scale": (0, {"rating": 6}, "rating", "expected an integer from 1 to 5, got"),
    "rating below the scale": (0, {"rating": 0}, "rating", "expected an integer from 1 to 5, got"),
    "fractional rating": (0, {"rating": 3.5}, "rating", "expected an integer from 1 to 5, got"),
    "text rating": (0, {"rating": "four"}, "rating", "expected an integer from 1 to 5"),
    "ok without a rating": (3, {"status": "ok"}, "rating", "status 'ok' needs a rating"),
    "abstention with a rating": (2, {"rating": 3}, "rating", "a call with status 'abstained' has no rating"),
    "failure with a rating": (0, {"status": "runtime_fail"}, "rating", "a call with status 'runtime_fail' has no rating"),
    "selector status": (0, {"status": "recovered"}, "status", "status 'recovered' is not one of ok, abstained"),
    "zero attempts": (0, {"attempts": 0}, "attempts", "expected an integer from 1"),
    "text seconds": (0, {"seconds": "slow"}, "seconds", "expected a number"),
    "object raw output": (0, {"raw_output": {"rating": 4}}, "raw_output", "expected text"),
    "unknown column": (0, {"outcome": "rubric"}, "outcome", "unknown column"),
}


@pytest.mark.parametrize("case, ext", _formats(RATING_CASES, {"object raw output"}))
def test_bad_ratings(case, ext, loaded_db, loaded_content, tmp_path, capsys):
    index, changes, field, message = RATING_CASES[case]
    bad = write_table(tmp_path / f"bad.{ext}", _edited(rating_rows(), index, **changes))
    line = index + 2 if ext == "csv" else index + 1
    argv = ["--votes", str(loaded_db.parent / "votes.csv"), "--ratings", f"k={bad}"]
    assert run_ingest(loaded_db, loaded_db.parent / "pools.csv", *argv) == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}, field '{field}': " in err and message in err, err
    assert snapshot(loaded_db) == loaded_content


def test_rating_outcome_sets_the_scale(tmp_path, capsys):
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    votes = write_table(tmp_path / "votes.csv", [dict(v, outcome="likert7") for v in vote_rows()])
    ratings = write_table(tmp_path / "r.csv", [{"candidate_id": "p1_east", "rating": 7}, {"candidate_id": "p1_west", "rating": 1}])
    db = tmp_path / "store.duckdb"
    declared = ["--votes", str(votes), "--outcome", "likert7=1:7", "--ratings", f"r={ratings}"]
    assert run_ingest(db, pools, *declared) == 2  # 7 is off the default rubric scale 1-5
    assert f"{ratings} line 2, field 'rating': expected an integer from 1 to 5, got '7'" in capsys.readouterr().err
    assert not db.exists()
    assert run_ingest(db, pools, *declared, "--rating-outcome", "likert7") == 0
    con = store.connect(db, read_only=True)
    try:
        config = json.loads(store.load_runs(con, "study")["config_json"].iloc[0])
        data = load_rating_data(con, "study", outcome="likert7")
    finally:
        con.close()
    assert config["outcome"] == "likert7" and config["scale"] == [1, 7] and data.scale == (1, 7)
    for outcome, message in {"unheard": "outcome 'unheard' has no scale", "half": "needs integer ends"}.items():
        assert run_ingest(tmp_path / "x.duckdb", pools, *declared, "--outcome", "half=0:2.5", "--rating-outcome", outcome) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: field '--rating-outcome': ") and message in err, err
    assert not (tmp_path / "x.duckdb").exists()


def test_judge_names_are_shared_by_decisions_scores_and_ratings(tmp_path, capsys):
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    votes = write_table(tmp_path / "votes.csv", vote_rows())
    scores = write_table(tmp_path / "s.csv", [{"candidate_id": c, "score": 0.5} for c in CANDIDATES])
    ratings = write_table(tmp_path / "r.csv", rating_rows())
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, pools, "--votes", str(votes), "--scores", f"j={scores}", "--ratings", f"j={ratings}") == 2
    assert "judge name 'j' is given twice" in capsys.readouterr().err
    assert not db.exists()
