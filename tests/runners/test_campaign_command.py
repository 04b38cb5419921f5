"""`python -m runners.campaign`: create, status, export (read back by `runners.ingest table`), invite and revoke;
bad input refused in one line naming the flag, exit status 2, the database file unchanged."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit_core import campaigns as cp
from audit_core import store
from runners import campaign as command
from runners import ingest
from tests.support.judgeacts import ingest_main_split
from tests.support.labels import write_label_dataset
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset

BLANKS = st.text(alphabet=" \t\n\u00a0\u200b\u200e\ufeff\u3000", max_size=4)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def main_db(tmp_path_factory) -> Path:
    """The published main split as dataset `main` with one campaign `taken`; tests that write copy it."""
    db = ingest_main_split(tmp_path_factory.mktemp("main") / "main.duckdb")
    assert command.main(["create", "--db", str(db), "--dataset", "main", "--campaign", "taken", "--task",
                         "alignment", "--pool", "all", "--sample", "uniform", "--size", "3", "--overlap", "1"]) == 0
    return db


def create_args(db: Path, **changes: str | bool | None) -> list[str]:
    """The create command's arguments with `changes` (a value True: a switch; None: the flag left out)."""
    flags = {"--db": str(db), "--dataset": "main", "--campaign": "new", "--task": "alignment", "--pool": "all",
             "--sample": "stratified:country", "--size": "20", "--overlap": "2", "--annotators": "ann,bob,cy",
             **changes}
    args = ["create"]
    for flag, value in flags.items():
        args += [] if value is None else [flag] if value is True else [flag, value]
    return args


BAD_VALUES = st.one_of(
    st.tuples(st.just("--dataset"), st.sampled_from(["nope", "MAIN"])),
    st.tuples(st.just("--dataset"), BLANKS),
    st.tuples(st.just("--campaign"), st.just("taken")),
    st.tuples(st.just("--campaign"), BLANKS),
    st.tuples(st.just("--pool"), st.sampled_from(["crowd", "All"])),
    st.tuples(st.just("--pool"), BLANKS),
    st.tuples(st.just("--annotators"), st.sampled_from(["ann,,bob", "ann, \u200b", "ann,ann"])),
    st.tuples(st.just("--overlap"), st.sampled_from(["4", "9", "0", "-1", "two", "1.5"])),
    st.tuples(st.just("--size"), st.sampled_from(["0", "301", "99999999999", "-3", "", "ten"])),
    st.tuples(st.just("--task"), st.sampled_from(["votes", "Alignment", ""])),
    st.tuples(st.just("--sample"), st.sampled_from([
        "stratified:planet", "gate:qwen agree>=9/9", "gate:nobody agree>=3/3", "gate:qwen agree>=3/3:kept=0",
        "picks-differ:qwen,gpt", "picks-differ:qwen", "systematic", "", "stratified:"])),
    st.tuples(st.just("--seed"), st.sampled_from(["-1", "x", "1e3"])),
    st.tuples(st.just("--taxonomy"), st.just("/nonexistent/tax.json")),
    st.tuples(st.just("--instructions"), st.sampled_from(["/nonexistent/instructions.txt", "/dev/zero", "/tmp"])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(BAD_VALUES)
def test_bad_input_is_one_line_naming_the_flag_exit_2_and_the_database_unchanged(main_db, capsys, bad):
    flag, value = bad
    before = sha256(main_db)
    with pytest.raises(SystemExit) as stop:
        raise SystemExit(command.main(create_args(main_db, **{flag: value})))
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and flag in err, err
    assert sha256(main_db) == before
    assert "Traceback" not in err


def test_create_draws_and_records_the_campaign_and_status_reports_it(main_db, tmp_path, capsys):
    db = Path(shutil.copy(main_db, tmp_path / "main.duckdb"))
    instructions = tmp_path / "instructions_v2.txt"
    instructions.write_text("Rate each image: yes, partly or no.\n", encoding="utf-8")
    assert command.main(create_args(db, **{"--sample": "gate:qwen agree>=3/3:kept=0.25", "--seed": "5",
                                           "--instructions": str(instructions), "--pool": "crowd",
                                           "--new-pool": True})) == 0
    out = capsys.readouterr().out
    assert "stratum 'kept': 5 of" in out and "stratum 'rejected': 15 of" in out
    con = store.connect(db, read_only=True)
    campaign = cp.load_campaign(con, "main", "new")
    assert campaign.instructions == instructions.read_text()
    assert campaign.instructions_sha256 == hashlib.sha256(instructions.read_bytes()).hexdigest()
    assert (campaign.seed, campaign.plan, campaign.annotators) == (5, "gate:qwen agree>=3/3:kept=0.25",
                                                                  ("ann", "bob", "cy"))
    assert cp.draw_record(con, campaign)["strata"]["kept"]["quota"] == 5
    sides = dict(con.execute("SELECT stratum, count(*) FROM campaign_items WHERE campaign = 'new' GROUP BY stratum")
                 .fetchall())
    assert sides == {"kept": 5, "rejected": 15}
    con.close()
    assert command.main(["status", "--db", str(db), "--dataset", "main", "--campaign", "new", "--resamples", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "undefined over 0 items" in lines[1]
    assert [line.split("\t")[:5] for line in lines[3:]] == [[a, "crowd", "0", "0", str(n)]
                                                            for a, n in (("ann", 14), ("bob", 13), ("cy", 13))]


def rate_all(db: Path, name: str, answer) -> None:
    con = store.connect(db)
    campaign = cp.load_campaign(con, "tiny", name)
    for annotator in campaign.annotators:
        while (item := cp.next_item(con, campaign, annotator)) is not None:
            cp.submit(con, campaign, annotator, item.item_id, answer(campaign, annotator, item),
                      cp.shown_order(campaign, annotator, item), 3.0)
    con.close()


def pools_table(db: Path, out: Path) -> Path:
    """The dataset's prompts, candidates and pool `all` alignment as a table-contract pools CSV (no images)."""
    con = store.connect(db, read_only=True)
    frame = store.load_candidates(con, "tiny").merge(store.load_prompts(con, "tiny"), on="prompt_id")
    frame = frame.merge(store.load_ratings(con, "tiny"), on="candidate_id")
    con.close()
    frame[["prompt_id", "prompt", "candidate_id", "country", "alignment"]].to_csv(out, index=False)
    return out


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_exported_votes_are_read_back_by_the_table_ingest(tmp_path, suffix, capsys):
    db = tmp_path / "tiny.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=6)
    assert command.main(["create", "--db", str(db), "--dataset", "tiny", "--campaign", "all-of-it", "--task",
                         "alignment", "--pool", "crowd", "--new-pool", "--sample", "uniform", "--size", "6",
                         "--overlap", "2", "--annotators", "ann,bob"]) == 0
    rng = np.random.default_rng(2)
    rate_all(db, "all-of-it", lambda c, a, item: {k: float(rng.choice([0, 0.5, 1])) for k in item.candidate_ids})
    out = tmp_path / f"votes{suffix}"
    assert command.main(["export", "--db", str(db), "--dataset", "tiny", "--campaign", "all-of-it", "--out",
                         str(out)]) == 0
    copy = tmp_path / "copy.duckdb"
    assert ingest.main(["table", "--pools", str(pools_table(db, tmp_path / "pools.csv")), "--votes", str(out),
                        "--db", str(copy), "--dataset", "tiny"]) == 0, capsys.readouterr().err
    con, back = store.connect(db, read_only=True), store.connect(copy, read_only=True)
    for table in ("votes", "ratings"):
        sql = f"SELECT * EXCLUDE (dataset_id) FROM {table} WHERE pool = 'crowd' ORDER BY ALL"
        assert con.execute(sql).fetchall() == back.execute(sql).fetchall()
    assert len(con.execute("SELECT * FROM votes WHERE pool = 'crowd'").fetchall()) == 2 * 21  # 6 pools of 3 or 4
    con.close(), back.close()


def test_exported_labels_are_read_back_as_gold_labels(tmp_path, capsys):
    db = tmp_path / "labels.duckdb"
    write_label_dataset(db, tmp_path / "images", n_prompts=4)
    assert command.main(["create", "--db", str(db), "--dataset", "tiny", "--campaign", "lab", "--task", "labels",
                         "--pool", "crowd", "--sample", "uniform", "--size", "5", "--overlap", "2",
                         "--annotators", "ann,bob,cy"]) == 0
    rate_all(db, "lab", lambda c, a, item: {k: (v[0] if a == "ann" else v[-1]) for k, v in c.taxonomy.items()})
    out = tmp_path / "gold.csv"
    assert command.main(["export", "--db", str(db), "--dataset", "tiny", "--campaign", "lab", "--out", str(out)]) == 0
    exported = pd.read_csv(out)
    assert list(exported.columns) == ["candidate_id", "attribute", "label"] and len(exported) == 5 * 7
    copy = tmp_path / "copy.duckdb"
    assert ingest.main(["table", "--pools", str(pools_table(db, tmp_path / "pools.csv")), "--labels", str(out),
                        "--db", str(copy), "--dataset", "tiny"]) == 0, capsys.readouterr().err
    back = store.connect(copy, read_only=True)
    stored = store.load_gold_labels(back, "tiny")
    back.close()
    merged = exported.merge(stored, on=["candidate_id", "attribute"], suffixes=("", "_back"))
    assert len(merged) == len(exported) and (merged["label"] == merged["label_back"]).all()


def test_invite_prints_a_link_whose_token_opens_the_campaign_until_revoked(main_db, tmp_path, capsys):
    db = Path(shutil.copy(main_db, tmp_path / "main.duckdb"))
    args = ["--db", str(db), "--dataset", "main", "--campaign", "taken"]
    assert command.main(["invite", *args, "--annotator", "remote one", "--host", "10.0.0.7", "--port", "8600"]) == 0
    link = capsys.readouterr().out.splitlines()[-1].removeprefix("link: ")
    url = urlparse(link)
    assert (url.scheme, url.netloc, url.path) == ("http", "10.0.0.7:8600", "/annotate")
    query = parse_qs(url.query)
    assert query["campaign"] == ["taken"]
    con = store.connect(db, read_only=True)
    held = cp.token_holder(con, query["token"][0])
    con.close()
    assert held is not None and (held[0].name, held[1]) == ("taken", "remote one")
    assert command.main(["revoke", *args, "--annotator", "remote one"]) == 0
    assert "revoked 1 token(s)" in capsys.readouterr().out
    con = store.connect(db, read_only=True)
    assert cp.token_holder(con, query["token"][0]) is None
    con.close()


def test_export_needs_a_csv_or_parquet_name_and_commands_need_an_existing_store(main_db, tmp_path, capsys):
    args = ["--dataset", "main", "--campaign", "taken"]
    assert command.main(["export", "--db", str(main_db), *args, "--out", str(tmp_path / "votes.xlsx")]) == 2
    assert "--out" in capsys.readouterr().err
    missing = tmp_path / "none.duckdb"
    for sub in (["status"], ["invite", "--annotator", "a"], ["create", "--task", "rubric", "--pool", "p", "--sample",
                                                              "uniform", "--size", "1", "--overlap", "1"]):
        assert command.main([sub[0], "--db", str(missing), *args, *sub[1:]]) == 2
        assert "--db" in capsys.readouterr().err and not missing.exists()
    assert command.main(["status", "--db", str(main_db), "--dataset", "main", "--campaign", "nope"]) == 2
    assert "no campaign 'nope'" in capsys.readouterr().err


def test_the_command_refuses_in_one_line_without_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-m", "runners.campaign", "status", "--db", str(tmp_path / "none.duckdb"),
                           "--dataset", "d", "--campaign", "c"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ") and "--db" in done.stderr
