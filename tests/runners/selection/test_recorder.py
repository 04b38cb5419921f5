"""The shared recording path: resume, key changes, retries, CLI errors, kill and resume."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit_core import store
from audit_core.errors import InputError
from runners import run_judge
from runners.backends.simulated import simulated_scorer, simulated_selector
from runners.run_judge import run_selector
from runners.score import run_scorer
from runners.selection import protocol, recorder
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset
from tests.support.recording import Scripted, calls_of, killed_mid_run, slowed_env


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "t.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=6)
    return path


def test_records_every_prompt_order_with_request_fields(db):
    con = store.connect(db)
    summary = run_selector(con, dataset="tiny", judge="sa", backend=simulated_selector("slot_a"),
                           backend_name="simulated", model="slot_a", progress=False)
    calls = calls_of(con, "sa")
    assert summary.recorded == len(calls) == 18 and summary.status == "finished"
    assert not calls.duplicated(["prompt_id", "order_index"]).any()
    assert calls["request_key"].is_unique
    row = calls.iloc[0]
    assert row["chosen_candidate_id"] == list(row["slot_candidate_ids"])["ABCD".index(row["choice_label"])]
    assert json.loads(row["input_json"])["image_sizes"][0] == [96, 96]
    run = con.execute("SELECT * FROM runs WHERE judge = 'sa'").df().iloc[0]
    config = json.loads(run["config_json"])
    assert run["status"] == "finished" and run["finished_at"] is not None
    assert run["instruction_sha256"] == protocol.load_instruction("ranking").sha256
    assert run["manifest_sha256"] == store.dataset_row(con, "tiny")["manifest_sha256"]
    assert run["model_revision"].startswith("simulated.json")
    assert config["orders"] == 3 and "duckdb" in config["libraries"]


def test_same_call_same_text_and_resume_skips_recorded(db):
    con = store.connect(db)
    first = run_selector(con, dataset="tiny", judge="w", backend=simulated_selector("weak"), backend_name="simulated",
                         model="weak", lenient=True, limit=3, progress=False)
    assert first.recorded == 9
    before = calls_of(con, "w")
    again = run_selector(con, dataset="tiny", judge="w", backend=simulated_selector("weak"), backend_name="simulated",
                         model="weak", lenient=True, progress=False)
    assert (again.skipped, again.recorded) == (9, 9)
    after = calls_of(con, "w")
    assert len(after) == 18 and not after.duplicated(["prompt_id", "order_index"]).any()
    kept = after.set_index("request_key").loc[before["request_key"]]
    assert list(kept["raw_output"]) == list(before["raw_output"])
    done = run_selector(con, dataset="tiny", judge="w", backend=simulated_selector("weak"), backend_name="simulated",
                        model="weak", lenient=True, progress=False)
    assert done.recorded == 0 and done.run_id is None
    # Determinism: a fresh judge name changes the key, but the same key gives the same text.
    request = recorder.plan_requests(con, dataset="tiny", judge="w", orders=3, contract="ranking", limit=1)[0][0]
    assert simulated_selector("weak").generate(request) == simulated_selector("weak").generate(request)


def test_changed_instruction_changes_keys_and_is_refused_clearly(db):
    con = store.connect(db)
    ranking_keys = {r.request_key for r in recorder.plan_requests(con, dataset="tiny", judge="j", orders=3,
                                                                  contract="ranking", limit=None)[0]}
    choice_keys = {r.request_key for r in recorder.plan_requests(con, dataset="tiny", judge="j", orders=3,
                                                                 contract="choice", limit=None)[0]}
    assert not ranking_keys & choice_keys
    run_selector(con, dataset="tiny", judge="j", backend=simulated_selector("strong"), backend_name="simulated",
                 model="strong", progress=False)
    with pytest.raises(InputError, match=r"instruction_sha256 .*request keys differ.*new --judge name.*--replace"):
        run_selector(con, dataset="tiny", judge="j", backend=simulated_selector("strong"), backend_name="simulated",
                     model="strong", contract="choice", progress=False)
    assert len(calls_of(con, "j")) == 18
    with pytest.raises(InputError, match="model 'strong'"):
        run_selector(con, dataset="tiny", judge="j", backend=simulated_selector("weak"), backend_name="simulated",
                     model="weak", progress=False)
    replaced = run_selector(con, dataset="tiny", judge="j", backend=simulated_selector("strong"),
                            backend_name="simulated", model="strong", contract="choice", replace=True, progress=False)
    calls = calls_of(con, "j")
    assert replaced.recorded == 18 and set(calls["request_key"]) == choice_keys
    assert calls["ranking"].isna().all()


def test_instruction_file_edit_changes_the_key(db, monkeypatch, tmp_path):
    con = store.connect(db)
    before = recorder.plan_requests(con, dataset="tiny", judge="j", orders=1, contract="ranking", limit=1)[0][0]
    edited = tmp_path / "instructions"
    edited.mkdir()
    (edited / "ranking_v1.txt").write_text(
        (protocol.INSTRUCTION_DIR / "ranking_v1.txt").read_text() + "Be brief.\n")
    monkeypatch.setattr(protocol, "INSTRUCTION_DIR", edited)
    protocol.load_instruction.cache_clear()
    try:
        after = recorder.plan_requests(con, dataset="tiny", judge="j", orders=1, contract="ranking", limit=1)[0][0]
    finally:
        protocol.load_instruction.cache_clear()
    assert before.request_key != after.request_key
    assert "Be brief." in after.text_after_images


def test_runtime_failure_gets_one_identical_retry_and_invalid_text_none(db):
    con = store.connect(db)
    flaky = Scripted(failures=1)
    run_selector(con, dataset="tiny", judge="flaky", backend=flaky, backend_name="test", model="m",
                 contract="choice", limit=2, concurrency=3, progress=False)
    calls = calls_of(con, "flaky")
    assert set(calls["status"]) == {"ok"} and set(calls["attempts"]) == {2}
    assert set(flaky.seen.values()) == {2}
    prose = Scripted(text="The first one.")
    run_selector(con, dataset="tiny", judge="prose", backend=prose, backend_name="test", model="m",
                 contract="choice", limit=2, progress=False)
    calls = calls_of(con, "prose")
    assert set(calls["status"]) == {"parse_fail"} and set(calls["attempts"]) == {1}
    assert set(prose.seen.values()) == {1} and set(calls["raw_output"]) == {"The first one."}
    assert calls["chosen_candidate_id"].isna().all()


def test_runtime_failures_are_recorded_then_retried_on_resume(db):
    con = store.connect(db)
    broken = Scripted(failures=2)
    summary = run_selector(con, dataset="tiny", judge="b", backend=broken, backend_name="test", model="m",
                           contract="choice", limit=1, progress=False)
    calls = calls_of(con, "b")
    assert summary.statuses == {"runtime_fail": 3}
    assert calls["parse_note"].str.contains("ConnectionError: scripted failure 2").all()
    resumed = run_selector(con, dataset="tiny", judge="b", backend=broken, backend_name="test", model="m",
                           contract="choice", limit=1, progress=False)
    calls = calls_of(con, "b")
    assert resumed.statuses == {"ok": 3} and len(calls) == 3 and set(calls["status"]) == {"ok"}


def test_scorer_writes_one_score_per_candidate_and_resumes(db):
    con = store.connect(db)
    summary = run_scorer(con, dataset="tiny", scorer="content", backend=simulated_scorer(),
                         backend_name="simulated", model="content", progress=False)
    scores = store.load_scores(con, "tiny")
    n = len(store.load_candidates(con, "tiny"))
    assert summary.recorded == len(scores) == n
    again = run_scorer(con, dataset="tiny", scorer="content", backend=simulated_scorer(),
                       backend_name="simulated", model="content", progress=False)
    assert again.recorded == 0 and again.skipped == n


def run_cli(capsys, *args):
    code = run_judge.main(list(args))
    return code, capsys.readouterr().err


def test_cli_errors_are_clear(db, capsys):
    base = ["--db", str(db), "--judge", "j", "--backend", "simulated", "--model", "strong", "--quiet"]
    code, err = run_cli(capsys, "--dataset", "nope", *base)
    assert code == 2 and "unknown dataset 'nope'" in err and "tiny" in err
    code, err = run_cli(capsys, "--dataset", "tiny", "--orders", "4", *base)
    assert code == 2 and "too few for 4 distinct orders" in err and "--orders" in err
    code, err = run_cli(capsys, "--dataset", "tiny", "--db", str(db), "--judge", "j", "--backend", "simulated",
                        "--model", "nosuch", "--quiet")
    assert code == 2 and "unknown simulated selector profile 'nosuch'" in err
    con = store.connect(db)
    path = store.load_candidates(con, "tiny")["image_path"].iloc[4]
    con.close()
    Path(path).write_bytes(b"not an image")
    code, err = run_cli(capsys, "--dataset", "tiny", *base)
    assert code == 2 and path in err and "cannot read image" in err
    Path(path).unlink()
    code, err = run_cli(capsys, "--dataset", "tiny", *base)
    assert code == 2 and path in err and "not found" in err
    con = store.connect(db)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path):
    db = tmp_path / "k.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=40, pool_sizes=(3, 4))
    env = slowed_env(tmp_path / "hook", "runners.backends.simulated", "SimulatedSelector", 0.02)
    cmd = [sys.executable, "-m", "runners.run_judge", "--db", str(db), "--dataset", "tiny", "--judge", "weak",
           "--backend", "simulated", "--model", "weak", "--lenient", "--concurrency", "2"]
    killed_mid_run(cmd, env, total=120, at_least=25)
    con = store.connect(db)
    first = calls_of(con, "weak")
    con.close()
    assert 25 <= len(first) < 120, "killed mid-way"
    out = subprocess.run(cmd + ["--quiet"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    con = store.connect(db)
    final = calls_of(con, "weak")
    runs = con.execute("SELECT status FROM runs ORDER BY started_at").fetchall()
    assert len(final) == 120
    assert not final.duplicated(["prompt_id", "order_index"]).any()
    assert final["request_key"].is_unique
    kept = final.set_index("request_key").loc[first["request_key"]]
    assert list(kept["raw_output"]) == list(first["raw_output"]) and list(kept["run_id"]) == list(first["run_id"])
    assert runs == [("interrupted",), ("finished",)]
    assert f"{120 - len(first)} recorded now" in out.stdout
