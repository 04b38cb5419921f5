"""Table ingest (CSV / Parquet / JSONL): round trip, parity with JudgeActs, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from PIL import Image

from audit_core import store
from audit_core.ingest import tables
from runners import ingest
from tests.support.paths import JUDGEACTS_DEV as DEV
from tests.support.snapshots import snapshot
from tests.support.tables import POOLS, pool_rows, write_table

CALLS = [
    # prompt_id, order, slots, chosen, label, status, raw, seconds
    ("p1", 0, ["p1_a", "p1_b", "p1_c"], "p1_b", None, None, '{"choice": "B"}', 1.5),
    ("p1", 1, ["p1_b", "p1_c", "p1_a"], None, "C", "recovered", "C", 0.25),
    ("p2", 0, ["p2_a", "p2_b"], None, None, "parse_fail", "I like both,\nreally", 2.0),
    ("p3", 0, ["p3_a", "p3_b", "p3_c", "p3_d"], "p3_d", "D", "ok", '{"choice": "D"}', None),
    ("p3", 1, ["p3_c", "p3_d", "p3_a", "p3_b"], None, None, None, None, 3.0),
]


def call_rows() -> list[dict]:
    keys = ("prompt_id", "order_index", "slot_candidate_ids", "chosen_candidate_id", "choice_label", "status",
            "raw_output", "seconds")
    return [{k: v for k, v in zip(keys, call) if v is not None} for call in CALLS]


def run_table(db: Path, pools: Path, decisions: dict[str, Path] = {}, scores: dict[str, Path] = {}, *extra: str) -> int:
    argv = ["table", "--pools", str(pools), "--db", str(db), "--dataset", "mine", *extra]
    for name, path in decisions.items():
        argv += ["--decisions", f"{name}={path}"]
    for name, path in scores.items():
        argv += ["--scores", f"{name}={path}"]
    return ingest.main(argv)


@pytest.mark.parametrize("ext", ["csv", "jsonl", "parquet"])
def test_round_trip(ext, tmp_path):
    pools = write_table(tmp_path / f"pools.{ext}", pool_rows())
    decisions = write_table(tmp_path / f"calls.{ext}", call_rows())
    scores = write_table(tmp_path / f"clip.{ext}", [{"candidate_id": r["candidate_id"], "score": i / 10} for i, r in enumerate(pool_rows())])
    db = tmp_path / "store.duckdb"
    assert run_table(db, pools, {"j": decisions}, {"clip": scores}) == 0
    con = store.connect(db, read_only=True)
    prompts = store.load_prompts(con, "mine")
    cands = store.load_candidates(con, "mine")
    ratings = store.load_ratings(con, "mine").set_index("candidate_id")
    n = dict(con.execute("SELECT candidate_id, n FROM ratings WHERE outcome = 'alignment'").fetchall())
    calls = store.load_calls(con, "mine").set_index(["prompt_id", "order_index"])
    scored = store.load_scores(con, "mine")
    con.close()
    assert list(prompts["prompt_id"]) == ["p1", "p2", "p3"]
    assert list(prompts["country"]) == ["Nigeria", "Japan", "India"]
    assert len(cands) == 9
    for pid, _, _, cs in POOLS:
        for cid, model, alignment, stereotype, count in cs:
            assert ratings.loc[cid, "alignment"] == alignment and n[cid] == count
            if stereotype is None:
                assert pd.isna(ratings.loc[cid, "stereotype"])  # absent stays absent
            else:
                assert ratings.loc[cid, "stereotype"] == stereotype
    expected = {  # (chosen, label, status)
        ("p1", 0): ("p1_b", "B", "ok"),
        ("p1", 1): ("p1_a", "C", "recovered"),
        ("p2", 0): (None, None, "parse_fail"),
        ("p3", 0): ("p3_d", "D", "ok"),
        ("p3", 1): (None, None, "runtime_fail"),
    }
    for call in CALLS:
        row = calls.loc[(call[0], call[1])]
        assert list(row["slot_candidate_ids"]) == call[2]
        chosen, label, status = expected[call[0], call[1]]
        assert (row["chosen_candidate_id"] if isinstance(row["chosen_candidate_id"], str) else None) == chosen
        assert (row["choice_label"] if isinstance(row["choice_label"], str) else None) == label
        assert row["status"] == status
        assert (row["raw_output"] if isinstance(row["raw_output"], str) else None) == call[6]
        assert (None if pd.isna(row["seconds"]) else row["seconds"]) == call[7]
    assert sorted(scored["score"]) == [i / 10 for i in range(9)]
    before = snapshot(db)
    assert run_table(db, pools, {"j": decisions}, {"clip": scores}) == 0
    assert snapshot(db) == before


def _dev_as_tables(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """The JudgeActs dev files re-expressed in the table contract (CSV)."""
    rows = []
    for line in (DEV / "data" / "derived" / "dev.jsonl").read_text().splitlines():
        p = json.loads(line)
        for c in p["candidates"]:
            rows.append({"prompt_id": p["prompt_id"], "prompt": p["prompt"], "country": p["country"],
                         "category": p["category"], "split": "dev", "candidate_id": c["id"],
                         "source_model": c["source_model"], "alignment": c["utility"], "n": c["n_utility"],
                         **{k: c[k] for k in ("stereotype", "missing_explicit", "missing_implicit",
                                              "image_quality", "overall")}})
    pools = tmp_path / "pools.csv"
    pd.DataFrame(rows).to_csv(pools, index=False)  # pandas' float text must round-trip exactly
    decisions = {}
    for judge in ("qwen", "smol"):
        calls = []
        for line in (DEV / "runs" / f"{judge}_dev.jsonl").read_text().splitlines():
            o = json.loads(line)
            ok = o["parse_ok"]
            calls.append({"prompt_id": o["prompt_id"], "order_index": o["permutation"],
                          "slot_candidate_ids": [o["mapping"][k] for k in sorted(o["mapping"])],
                          "choice_label": o["parsed"]["choice"] if ok else None,
                          "status": ("recovered" if o.get("recovered") else "ok") if ok else "parse_fail",
                          "raw_output": o["raw_output"], "seconds": o["seconds"]})
        decisions[judge] = write_table(tmp_path / f"{judge}.csv", calls)
    return pools, decisions


@pytest.mark.skipif(not DEV.is_dir(), reason="shared JudgeActs files are not available")
def test_same_store_content_as_judgeacts_path(tmp_path):
    pools, decisions = _dev_as_tables(tmp_path)
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    assert run_table(a, pools, decisions) == 0
    argv = ["judgeacts", "--pools", str(DEV / "data" / "derived" / "dev.jsonl"), "--db", str(b), "--dataset", "mine"]
    for judge in ("qwen", "smol"):
        argv += ["--run", f"{judge}={DEV / 'runs' / f'{judge}_dev.jsonl'}"]
    assert ingest.main(argv) == 0
    cols = {
        "prompts": "prompt_id, prompt, country, category, split",
        "candidates": "prompt_id, candidate_id, canonical_index, source_model",
        "ratings": "candidate_id, outcome, pool, value",
        "calls": "r.judge, c.prompt_id, c.order_index, c.slot_candidate_ids, c.status, c.choice_label, "
                 "c.chosen_candidate_id, c.raw_output, c.seconds",
    }
    for table, columns in cols.items():
        source = f"{table} c JOIN runs r USING (run_id)" if table == "calls" else table
        sql = f"SELECT {columns} FROM {source} ORDER BY ALL"
        with duckdb.connect(str(a), read_only=True) as ca, duckdb.connect(str(b), read_only=True) as cb:
            assert ca.execute(sql).fetchall() == cb.execute(sql).fetchall(), table


# ---------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def loaded_db(tmp_path_factory):
    """A store holding the good tables; bad-input tests must leave it as it is."""
    folder = tmp_path_factory.mktemp("loaded")
    db = folder / "store.duckdb"
    good = write_table(folder / "good.csv", pool_rows())
    assert run_table(db, good, {"j": write_table(folder / "good_calls.csv", call_rows())}) == 0
    return db


def _edit_pool(i: int, **changes):
    def edit(rows):
        rows[i].update(changes)
        for k, v in changes.items():
            if v is None:
                del rows[i][k]
        return rows
    return edit


POOL_CASES = {
    # case: (edit, line in CSV (header = 1), field, message)
    "missing alignment": (_edit_pool(2, alignment=None), 4, "alignment", "no alignment rating in pool 'all'"),
    "non-numeric alignment": (_edit_pool(1, alignment="good"), 3, "alignment", "expected a number"),
    "non-numeric optional rating": (_edit_pool(4, stereotype="n/a"), 6, "stereotype", "expected a number"),
    "infinite rating": (_edit_pool(4, alignment="inf"), 6, "alignment", "finite"),
    "bad count": (_edit_pool(0, n="2.5"), 2, "n", "integer"),
    "pool of one": (_edit_pool(4, prompt_id="p9", prompt="lonely"), 5, "candidates", "prompt 'p2' has 1 candidate"),
    "prompt text disagrees": (_edit_pool(1, prompt="Other text"), 3, "prompt", "on line 2"),
    "duplicate candidate": (_edit_pool(1, candidate_id="p1_a"), 3, "candidate_id", "duplicate row"),
    "missing image": (_edit_pool(0, image_path="img/none.png"), 2, "image_path", "no such file"),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_bad_pools(case, loaded_db, tmp_path, capsys):
    edit, line, field, message = POOL_CASES[case]
    bad = write_table(tmp_path / "bad.csv", edit(pool_rows()))
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad) == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}, field '{field}'" in err and message in err, err
    assert snapshot(loaded_db) == before


def _edit_call(i: int, **changes):
    def edit(rows):
        rows[i].update(changes)
        return rows
    return edit


CALL_CASES = {
    # case: (edit, index of the bad call, field, message)
    "unknown prompt": (_edit_call(2, prompt_id="p7"), 2, "prompt_id", "unknown prompt id 'p7'"),
    "unknown candidate": (_edit_call(0, slot_candidate_ids=["p1_a", "p1_x", "p1_c"], chosen_candidate_id="p1_a"),
                          0, "slot_candidate_ids", "'p1_x' is not a candidate of prompt 'p1'"),
    "chosen not shown": (_edit_call(0, chosen_candidate_id="p2_a"), 0, "chosen_candidate_id", "not among the images shown"),
    "partial pool": (_edit_call(0, slot_candidate_ids=["p1_a", "p1_b"]), 0, "slot_candidate_ids", "misses p1_c"),
    "duplicate call": (_edit_call(1, order_index=0), 1, "order_index", "duplicate call"),
    "label and id disagree": (_edit_call(3, choice_label="A"), 3, "choice_label", "does not show"),
    "unknown label": (_edit_call(1, choice_label="E"), 1, "choice_label", "not a slot label"),
    "bad status": (_edit_call(0, status="great"), 0, "status", "not one of"),
    "failed call with a pick": (_edit_call(2, choice_label="A"), 2, "chosen_candidate_id", "chooses nothing"),
    "negative order": (_edit_call(0, order_index=-1), 0, "order_index", "integer"),
    "non-numeric seconds": (_edit_call(0, seconds="slow"), 0, "seconds", "number"),
    "unknown column": (_edit_call(0, judge_name="x"), 0, "judge_name", "unknown column"),
}
# CSV: header on line 1, and call 2's raw output spans two lines
CSV_LINE = {0: 2, 1: 3, 2: 4, 3: 6, 4: 7}


@pytest.mark.parametrize("ext", ["csv", "jsonl"])
@pytest.mark.parametrize("case", sorted(CALL_CASES))
def test_bad_decisions(case, ext, loaded_db, tmp_path, capsys):
    edit, index, field, message = CALL_CASES[case]
    good_pools = write_table(tmp_path / "good.csv", pool_rows())
    bad = write_table(tmp_path / f"bad.{ext}", edit(call_rows()))
    line = CSV_LINE[index] if ext == "csv" else index + 1
    before = snapshot(loaded_db)
    assert run_table(loaded_db, good_pools, {"k": bad}) == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}, field '{field}'" in err and message in err, err
    assert snapshot(loaded_db) == before


def test_malformed_rows(loaded_db, tmp_path, capsys):
    good = loaded_db.parent / "good.csv"
    lines = good.read_text().splitlines()
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("\n".join(lines[:3] + [lines[3] + ",extra"] + lines[4:]) + "\n")
    bad_jsonl = tmp_path / "bad.jsonl"
    bad_jsonl.write_text(json.dumps(pool_rows()[0]) + '\n{"prompt_id": \n')
    bad_parquet = tmp_path / "bad.parquet"
    bad_parquet.write_bytes(b"PAR1 not really")
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad_csv) == 2
    assert f"{bad_csv} line 4: malformed row" in capsys.readouterr().err
    assert run_table(loaded_db, bad_jsonl) == 2
    assert f"{bad_jsonl} line 2: not valid JSON" in capsys.readouterr().err
    assert run_table(loaded_db, bad_parquet) == 2
    assert "not a readable Parquet file" in capsys.readouterr().err
    assert snapshot(loaded_db) == before


def test_scores_must_cover_every_candidate(loaded_db, tmp_path, capsys):
    scores = write_table(tmp_path / "s.csv", [{"candidate_id": r["candidate_id"], "score": 0.1} for r in pool_rows()[:-1]])
    before = snapshot(loaded_db)
    assert run_table(loaded_db, loaded_db.parent / "good.csv", {}, {"clip": scores}) == 2
    assert "no score for candidate 'p3_d'" in capsys.readouterr().err
    assert snapshot(loaded_db) == before


def test_changed_pools_need_replace(tmp_path, capsys):
    loaded_db = tmp_path / "store.duckdb"
    assert run_table(loaded_db, write_table(tmp_path / "good.csv", pool_rows()), {"j": write_table(tmp_path / "c.csv", call_rows())}) == 0
    changed = write_table(tmp_path / "changed.csv", _edit_pool(0, alignment=0.75)(pool_rows()))
    before = snapshot(loaded_db)
    assert run_table(loaded_db, changed) == 2
    assert "--replace" in capsys.readouterr().err
    assert snapshot(loaded_db) == before
    assert run_table(loaded_db, changed, {}, {}, "--replace") == 0
    con = store.connect(loaded_db, read_only=True)
    assert store.load_ratings(con, "mine").set_index("candidate_id").loc["p1_a", "alignment"] == 0.75
    assert store.load_runs(con, "mine").empty  # replacing pools drops their recorded runs
    con.close()


# ---------------------------------------------------------------- whole classes of bad input


def _png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 3), (200, 10, 10)).save(path)
    return path


def test_byte_order_mark_is_accepted(tmp_path):
    """Excel writes UTF-8 CSV with a BOM; JSONL may carry one too."""
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    pools.write_bytes(b"\xef\xbb\xbf" + pools.read_bytes())
    decisions = write_table(tmp_path / "calls.jsonl", call_rows())
    decisions.write_bytes(b"\xef\xbb\xbf" + decisions.read_bytes())
    db = tmp_path / "store.duckdb"
    assert run_table(db, pools, {"j": decisions}) == 0
    con = store.connect(db, read_only=True)
    assert list(store.load_prompts(con, "mine")["prompt_id"]) == ["p1", "p2", "p3"]
    assert len(store.load_calls(con, "mine")) == len(CALLS)
    con.close()


@pytest.mark.parametrize("ext, line", [("csv", 5), ("jsonl", 4)])
def test_bytes_that_are_not_utf8_name_line_and_column(ext, line, loaded_db, tmp_path, capsys):
    bad = write_table(tmp_path / f"bad.{ext}", pool_rows())
    bad.write_bytes(bad.read_bytes().replace(b"Tea ceremony", b"Tea \xff\xfeceremony", 1))
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad) == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}, field 'prompt': not UTF-8 text (byte 0xff" in err, err
    assert snapshot(loaded_db) == before


def test_lone_surrogate_escape_is_not_text(loaded_db, tmp_path, capsys):
    bad = write_table(tmp_path / "calls.jsonl", call_rows())
    bad.write_text(bad.read_text().replace('I like both', 'I like \\ud800 both', 1))
    before = snapshot(loaded_db)
    assert run_table(loaded_db, loaded_db.parent / "good.csv", {"k": bad}) == 2
    assert f"{bad} line 3, field 'raw_output': not text (lone surrogate \\ud800" in capsys.readouterr().err
    assert snapshot(loaded_db) == before


INTEGER_CASES = {
    # case: (file kind, row index, column, value)
    "count beyond INTEGER": ("pools", 0, "n", 2**31),
    "count in exponent notation beyond INTEGER": ("pools", 1, "n", "1e20"),
    "order beyond 32 bits": ("calls", 0, "order_index", 2**32),
    "attempts beyond 64 bits": ("calls", 3, "attempts", 2**64),
}


@pytest.mark.parametrize("case", sorted(INTEGER_CASES))
def test_integers_beyond_the_column_type(case, loaded_db, tmp_path, capsys):
    kind, index, column, value = INTEGER_CASES[case]
    pools_rows, calls = pool_rows(), call_rows()
    (pools_rows if kind == "pools" else calls)[index][column] = value
    pools = write_table(tmp_path / "pools.jsonl", pools_rows)
    decisions = write_table(tmp_path / "calls.jsonl", calls)
    bad = pools if kind == "pools" else decisions
    new_db = tmp_path / "new" / "store.duckdb"
    for db in (loaded_db, new_db):
        before = snapshot(db)
        assert run_table(db, pools, {"j": decisions}) == 2
        err = capsys.readouterr().err
        assert f"{bad} line {index + 1}, field '{column}': expected an integer from" in err and "2147483647" in err, err
        assert snapshot(db) == before
    assert not (tmp_path / "new").exists()


def test_failure_after_creating_the_database_removes_it(tmp_path, capsys, monkeypatch):
    """A decisions file that vanishes after it was read fails inside the transaction: no file is left."""
    pools = write_table(tmp_path / "pools.csv", pool_rows())
    decisions = write_table(tmp_path / "calls.csv", call_rows())
    read = tables.read_decisions_table

    def read_then_lose(path, judge):
        run = read(path, judge)
        Path(path).unlink()
        return run

    monkeypatch.setattr(tables, "read_decisions_table", read_then_lose)
    db = tmp_path / "new" / "deeper" / "store.duckdb"
    assert run_table(db, pools, {"j": decisions}) == 2
    assert f"error: {decisions}: cannot read file (No such file or directory)" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


TYPE_CASES = {
    # case: (file kind, row index, column, value, message)
    "object as country": ("pools", 0, "country", {"name": "Nigeria"}, "expected text"),
    "list as source model": ("pools", 1, "source_model", ["m2"], "expected text"),
    "number as image path": ("pools", 2, "image_path", 7, "expected text"),
    "number as prompt": ("pools", 3, "prompt", 12, "expected text"),
    "blank id": ("pools", 4, "candidate_id", "  ", "a name cannot be blank"),
    "number as ranking": ("calls", 0, "ranking", 3, "expected a list"),
    "object as raw output": ("calls", 1, "raw_output", {"choice": "C"}, "expected text"),
}


@pytest.mark.parametrize("case", sorted(TYPE_CASES))
def test_wrong_json_types_are_refused(case, loaded_db, tmp_path, capsys):
    kind, index, column, value, message = TYPE_CASES[case]
    pools_rows, calls = pool_rows(), call_rows()
    (pools_rows if kind == "pools" else calls)[index][column] = value
    pools = write_table(tmp_path / "pools.jsonl", pools_rows)
    decisions = write_table(tmp_path / "calls.jsonl", calls)
    before = snapshot(loaded_db)
    assert run_table(loaded_db, pools, {"j": decisions}) == 2
    err = capsys.readouterr().err
    bad = pools if kind == "pools" else decisions
    assert f"{bad} line {index + 1}, field '{column}': {message}" in err, err
    assert snapshot(loaded_db) == before


@pytest.mark.parametrize("text", ["1_0", "\u0661", "\u0660.\u0665", "nan", "-inf", "Infinity", "1e999", "0x1", "½"])
@pytest.mark.parametrize("ext", ["csv", "jsonl"])
def test_number_spellings_float_accepts_but_no_table_means(text, ext, loaded_db, tmp_path, capsys):
    rows = pool_rows()
    rows[0]["alignment"] = text
    bad = write_table(tmp_path / f"bad.{ext}", rows)
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad) == 2
    err = capsys.readouterr().err
    line = 2 if ext == "csv" else 1
    assert f"{bad} line {line}, field 'alignment': expected a" in err and "number" in err, err
    assert snapshot(loaded_db) == before


def test_nan_is_absent_in_parquet_but_refused_in_jsonl(loaded_db, tmp_path, capsys):
    rows = pool_rows()
    rows[0]["stereotype"] = float("nan")  # pandas' missing float
    db = tmp_path / "store.duckdb"
    assert run_table(db, write_table(tmp_path / "pools.parquet", rows)) == 0
    con = store.connect(db, read_only=True)
    assert pd.isna(store.load_ratings(con, "mine").set_index("candidate_id").loc["p1_a", "stereotype"])
    con.close()
    bad = write_table(tmp_path / "pools.jsonl", rows)  # json.dumps writes NaN
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad) == 2
    assert f"{bad} line 1, field 'stereotype': expected a finite number, got nan" in capsys.readouterr().err
    assert snapshot(loaded_db) == before


def test_plain_number_spellings_are_accepted(tmp_path):
    rows = pool_rows()
    for row, text in zip(rows, [" 1 ", "+.5", "0.", "5e-1", "1E0", "0.25", "-0", "1", "0"]):
        row["alignment"] = text
    db = tmp_path / "store.duckdb"
    assert run_table(db, write_table(tmp_path / "pools.csv", rows)) == 0
    con = store.connect(db, read_only=True)
    ratings = store.load_ratings(con, "mine").set_index("candidate_id")["alignment"]
    con.close()
    assert [ratings[r["candidate_id"]] for r in rows] == [1.0, 0.5, 0.0, 0.5, 1.0, 0.25, 0.0, 1.0, 0.0]


SCALE_CASES = {
    # case: (ext, row index, column, value)
    "stereotype rate of 2": ("csv", 0, "stereotype", 2),
    "negative alignment": ("csv", 1, "alignment", -1),
    "overall on 1-5 not rescaled": ("jsonl", 2, "overall", 4),
    "image quality just above 1": ("parquet", 3, "image_quality", 1.0000001),
}


@pytest.mark.parametrize("case", sorted(SCALE_CASES))
def test_ratings_off_their_outcome_scale(case, loaded_db, tmp_path, capsys):
    ext, index, column, value = SCALE_CASES[case]
    rows = pool_rows()
    rows[index][column] = value
    bad = write_table(tmp_path / f"bad.{ext}", rows)
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad) == 2
    err = capsys.readouterr().err
    line = index + 2 if ext == "csv" else index + 1
    assert f"{bad} line {line}, field '{column}': {column} rating" in err and "off its scale [0, 1]" in err, err
    assert snapshot(loaded_db) == before


def test_an_outcome_of_your_own_declares_its_scale(tmp_path, capsys):
    rows = pool_rows()
    for k, row in enumerate(rows):
        row["helpfulness"] = 1 + k % 5
    pools = write_table(tmp_path / "pools.csv", rows)
    db = tmp_path / "store.duckdb"
    assert run_table(db, pools) == 2  # undeclared: refused, saying how to declare it
    err = capsys.readouterr().err
    assert "field 'helpfulness': unknown column" in err and "--outcome NAME=LO:HI" in err
    assert not db.exists()
    assert run_table(db, pools, {}, {}, "--outcome", "helpfulness=1:5") == 0
    con = store.connect(db, read_only=True)
    stored = store.load_ratings(con, "mine").set_index("candidate_id")["helpfulness"]
    con.close()
    assert [stored[r["candidate_id"]] for r in rows] == [r["helpfulness"] for r in rows]
    rows[4]["helpfulness"] = 6
    bad = write_table(tmp_path / "bad.csv", rows)
    before = snapshot(db)
    assert run_table(db, bad, {}, {}, "--outcome", "helpfulness=1:5") == 2
    assert f"{bad} line 6, field 'helpfulness': helpfulness rating 6.0 of 'p2_b' is off its scale [1, 5]" in capsys.readouterr().err
    assert snapshot(db) == before


@pytest.mark.parametrize("declaration", ["alignment=0:5", "rubric=0:10", "helpfulness=5:1", "helpfulness=1", "x-y=1:5", "h=nan:1"])
def test_bad_outcome_declarations_are_usage_errors(declaration, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_table(tmp_path / "store.duckdb", tmp_path / "pools.csv", {}, {}, "--outcome", declaration)
    assert exit_info.value.code == 2 and "--outcome" in capsys.readouterr().err
    assert not (tmp_path / "store.duckdb").exists()


def test_images_are_confined_to_the_table_folder_and_decoded(tmp_path, capsys):
    folder = tmp_path / "dataset"
    inside = _png(folder / "img" / "p1_a.png")
    outside = _png(tmp_path / "elsewhere" / "secret.png")
    (folder / "img" / "link.png").symlink_to(outside)
    (folder / "img" / "inner_link.png").symlink_to(inside)
    (folder / "img" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 32)
    cases = {
        str(outside): "absolute path",
        "../elsewhere/secret.png": "leads outside the dataset's folder",
        "img/../../elsewhere/secret.png": "leads outside the dataset's folder",
        "img/link.png": "leads outside the dataset's folder",
        "img/broken.png": "image cannot be decoded",
        "img/missing.png": "no such file",
    }
    db = tmp_path / "store.duckdb"
    for image, message in cases.items():
        rows = pool_rows()
        rows[1]["image_path"] = image
        bad = write_table(folder / "pools.csv", rows)
        assert run_table(db, bad) == 2, image
        assert f"{bad} line 3, field 'image_path': " in (err := capsys.readouterr().err) and message in err, err
        assert not db.exists()
    rows = pool_rows()
    rows[0]["image_path"], rows[1]["image_path"] = "img/p1_a.png", "img/inner_link.png"
    assert run_table(db, write_table(folder / "pools.csv", rows)) == 0
    con = store.connect(db, read_only=True)
    paths = store.load_candidates(con, "mine").set_index("candidate_id")["image_path"]
    con.close()
    assert paths["p1_a"] == paths["p1_b"] == str(inside.resolve())


def test_repeated_csv_column_and_json_key_are_refused(loaded_db, tmp_path, capsys):
    good = (loaded_db.parent / "good.csv").read_text().splitlines()
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("\n".join([good[0] + ",alignment"] + [line + ",0.5" for line in good[1:]]) + "\n")
    bad_jsonl = tmp_path / "bad.jsonl"
    bad_jsonl.write_text(json.dumps(pool_rows()[0])[:-1] + ', "alignment": 0.0}\n')
    before = snapshot(loaded_db)
    assert run_table(loaded_db, bad_csv) == 2
    assert f"{bad_csv} line 1, field 'alignment': column appears twice" in capsys.readouterr().err
    assert run_table(loaded_db, bad_jsonl) == 2
    assert f"{bad_jsonl} line 1, field 'alignment': key appears twice" in capsys.readouterr().err
    assert snapshot(loaded_db) == before
