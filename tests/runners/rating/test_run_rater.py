"""Rating runs: requests and keys, conditions, resume, retries, CLI errors, kill and resume, hf and openai."""

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_core import store
from audit_core.errors import InputError
from runners import run_rater
from runners.backends.simulated_rater import simulated_rater
from runners.rating import protocol as rating_protocol
from runners.rating.recorder import load_rating_scope, plan_ratings, pool_consensus, record_rater
from tests.support.rating_runs import CONDITIONS, OUTCOME, write_rating_dataset
from tests.support.recording import Scripted, assert_resumed, killed_mid_run, slowed_env
from tests.support.snapshots import snapshot


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "r.duckdb"
    write_rating_dataset(path, tmp_path / "images")
    return path


def rate(con, files, judge="t", profile="tilted", conditions=("default",), **kwargs):
    instruction, conditions_file = files
    backend = kwargs.pop("backend", None) or simulated_rater(profile, pool_consensus(con, "tiny", OUTCOME))
    return record_rater(con, dataset="tiny", judge=judge, backend=backend, backend_name=kwargs.pop("backend_name", "simulated"),
                        model=profile, conditions=conditions, conditions_file=conditions_file,
                        instruction_file=instruction, progress=False, **kwargs)


def plan(con, files, conditions, judge="t", conditions_file=None):
    instruction, default_conditions = files
    rubric = rating_protocol.load_rubric(instruction)
    chosen = rating_protocol.select_conditions(conditions_file or default_conditions, conditions)
    scope = load_rating_scope(con, dataset="tiny", outcome=rubric.outcome, limit=None)
    return plan_ratings(scope, judge=judge, instruction=rubric, conditions=chosen)[0]


def rows(con, judge="t"):
    return store.load_rating_calls(con, "tiny").query("judge == @judge").sort_values(["condition", "candidate_id"])


def test_rates_every_item_under_each_condition_and_records_the_run(db, files):
    con = store.connect(db)
    n_items = len(store.load_candidates(con, "tiny"))
    summary = rate(con, files, conditions=("default", "demos_a"))
    calls = rows(con)
    assert summary.kind == "rater" and summary.recorded == len(calls) == 2 * n_items
    assert not calls.duplicated(["condition", "candidate_id"]).any() and calls["request_key"].is_unique
    assert set(calls["status"]) <= {"ok", "parse_fail"} and (calls["status"] == "ok").mean() > 0.9
    ok = calls["status"] == "ok"
    assert calls.loc[ok, "rating"].between(1, 5).all() and calls.loc[~ok, "rating"].isna().all()
    assert (calls.loc[ok, "rating"] % 1 == 0).all() and calls["raw_output"].map(lambda t: isinstance(t, str)).all()
    run = con.execute("SELECT * FROM runs WHERE judge = 't'").df().iloc[0]
    config = json.loads(run["config_json"])
    assert (run["kind"], run["status"]) == ("rater", "finished")
    assert run["instruction_sha256"] == rating_protocol.load_rubric(files[0]).sha256
    assert run["model_revision"].startswith("simulated_raters.json")
    assert set(config["conditions"]) == {"default", "demos_a"} and config["outcome"] == OUTCOME
    shown = con.execute("SELECT candidate_id, condition, input_json FROM rating_calls").df()
    for cid, condition, text in shown.itertuples(index=False):
        info = json.loads(text)
        assert cid not in info["demonstrations"]  # never the item being rated
        assert len(info["demonstrations"]) == (2 if condition == "demos_a" else 0)
        assert info["image_size"] == [96, 96]


def test_a_rater_that_copies_pool_a_gives_its_consensus_and_the_floor_rater_shows_its_floor(db, files):
    con = store.connect(db)
    consensus = pool_consensus(con, "tiny", OUTCOME)
    wide = consensus.pivot(index="candidate_id", columns="pool", values="consensus")
    copier = replace(simulated_rater("tilted", consensus), pool_weights={"a": 1.0}, noise=0.0, prose_rate=0.0)
    rate(con, files, judge="copy", backend=copier)
    got = rows(con, "copy").set_index("candidate_id")["rating"]
    assert (got == np.floor(wide.loc[got.index, "a"] + 0.5)).all()
    rate(con, files, judge="floor", profile="floor")
    floor = rows(con, "floor")
    assert (floor["rating"] <= 2).mean() < (wide["a"] <= 2).mean()
    rate(con, files, judge="unsure", profile="unsure")
    unsure = rows(con, "unsure").set_index("candidate_id")
    contested = (wide["a"] - wide["b"]).abs() >= 1.5
    assert (unsure.loc[contested[contested].index, "status"] == "abstained").all()
    assert unsure.loc[contested[~contested].index, "status"].eq("ok").all()
    assert unsure.loc[unsure["status"] == "abstained", "rating"].isna().all()


def test_the_persona_condition_moves_the_tilted_rater_part_of_the_way(db, files):
    con = store.connect(db)
    consensus = pool_consensus(con, "tiny", OUTCOME)
    backend = simulated_rater("tilted", consensus)
    requests = {(r.condition, r.candidate_id): r for r in plan(con, files, ["default", "insider_persona"])}
    wide = consensus.pivot(index="candidate_id", columns="pool", values="consensus")
    differ = wide.index[(wide["a"] - wide["b"]).abs() > 0]
    views = {c: np.array([backend.view(requests[(c, cid)]) for cid in differ]) for c in ("default", "insider_persona")}
    t = {c: np.mean((2 * v - wide.loc[differ, "a"] - wide.loc[differ, "b"]) / (wide.loc[differ, "a"] - wide.loc[differ, "b"]))
         for c, v in views.items()}
    assert t["default"] == pytest.approx(0.8) and t["insider_persona"] == pytest.approx(-0.1)  # half way toward b


def test_resume_records_identical_and_nothing_duplicated(db, files):
    con = store.connect(db)
    first = rate(con, files, conditions=("default",), limit=5)
    before = rows(con)
    again = rate(con, files, conditions=("default",))
    after = rows(con)
    n_items = len(store.load_candidates(con, "tiny"))
    assert (first.recorded, again.skipped, again.recorded) == (5, 5, n_items - 5)
    assert len(after) == n_items and not after.duplicated(["condition", "candidate_id"]).any()
    kept = after.set_index("request_key").loc[before["request_key"]]
    assert list(kept["raw_output"]) == list(before["raw_output"]) and list(kept["run_id"]) == list(before["run_id"])
    done = rate(con, files, conditions=("default",))
    assert (done.recorded, done.run_id) == (0, None)
    # Determinism: the same request gives the same text.
    request = plan(con, files, ["default"])[0]
    backend = simulated_rater("tilted", pool_consensus(con, "tiny", OUTCOME))
    assert backend.generate(request) == backend.generate(request)


def test_conditions_resume_independently(db, files):
    con = store.connect(db)
    n_items = len(store.load_candidates(con, "tiny"))
    rate(con, files, conditions=("default",))
    both = rate(con, files, conditions=("default", "insider_persona", "demos_b"))
    assert (both.skipped, both.recorded) == (n_items, 2 * n_items)
    calls = rows(con)
    assert calls.groupby("condition").size().to_dict() == {"default": n_items, "insider_persona": n_items,
                                                            "demos_b": n_items}
    assert con.execute("SELECT count(*) FROM runs WHERE judge = 't'").fetchone()[0] == 2


def test_demonstrations_are_deterministic_other_items_with_the_pool_consensus(db, files):
    con = store.connect(db)
    requests = plan(con, files, ["demos_a", "demos_b"])
    assert requests == plan(con, files, ["demos_a", "demos_b"])
    consensus = pool_consensus(con, "tiny", OUTCOME).set_index(["candidate_id", "pool"])["consensus"]
    for request in requests:
        ids = [cid for cid, _ in request.image_files]
        assert ids[-1] == request.candidate_id and request.candidate_id not in ids[:-1] and len(ids) == 3
        kinds = [kind for kind, _ in request.segments()]
        assert kinds.count("image") == 3 and request.image_paths[-1].endswith(f"{request.candidate_id}.png")
        text = "".join(value for kind, value in request.segments() if kind == "text")
        pool = request.demonstration_pool
        for cid in ids[:-1]:
            assert f"Rating: {int(np.floor(consensus[(cid, pool)] + 0.5))}" in text
        assert text.count('Prompt: "') == 3 and "Now rate this image." in text
    for condition in ("demos_a", "demos_b"):
        # The first k+1 items in a fixed order: an item among them gets the other k, every other item the first k.
        sets = {tuple(c for c, _ in r.image_files[:-1]) for r in requests if r.condition == condition}
        assert 2 <= len(sets) <= 3


def test_every_text_shown_is_in_the_key_and_a_changed_persona_is_refused(db, files, tmp_path):
    con = store.connect(db)
    keys = {r.request_key: (r.condition, r.candidate_id) for r in plan(con, files, ["default", "insider_persona"])}
    assert len(keys) == 2 * len(store.load_candidates(con, "tiny"))  # conditions never share a key
    assert {r.request_key for r in plan(con, files, ["default"], judge="other")}.isdisjoint(keys)
    rate(con, files, conditions=("default", "insider_persona"))
    edited = json.loads(json.dumps(CONDITIONS))
    edited["conditions"]["insider_persona"]["persona"] += " Be strict."
    edited_file = tmp_path / "conditions_v2.json"
    edited_file.write_text(json.dumps(edited))
    new = {r.request_key: r for r in plan(con, files, ["default", "insider_persona"], conditions_file=edited_file)}
    changed = {keys[k] for k in set(keys) - set(new)}
    assert {c for c, _ in changed} == {"insider_persona"} and len(changed) == len(keys) // 2
    assert all("Be strict." in r.segments()[0][1] for r in new.values() if r.condition == "insider_persona")
    with pytest.raises(InputError, match=r"condition 'insider_persona'.*definition .* changed.*--replace"):
        rate(con, (files[0], edited_file), conditions=("default", "insider_persona"))
    assert len(rows(con)) == len(keys)
    replaced = rate(con, (files[0], edited_file), conditions=("default", "insider_persona"), replace=True)
    assert replaced.recorded == len(keys) and set(rows(con)["request_key"]) == set(new)


def test_changed_demonstration_consensus_is_refused_and_named(db, files):
    con = store.connect(db)
    rate(con, files, conditions=("demos_a",))
    con.execute("UPDATE votes SET value = CASE WHEN value < 5 THEN value + 1 ELSE 1 END WHERE pool = 'a'")
    with pytest.raises(InputError, match=r"condition 'demos_a'.*demonstrations' consensus"):
        rate(con, files, conditions=("demos_a",))


def test_other_instruction_or_model_under_one_judge_name_is_refused(db, files, tmp_path):
    con = store.connect(db)
    rate(con, files)
    edited = tmp_path / "rubric_test_v2.txt"
    edited.write_text(files[0].read_text() + "Be brief.\n")
    with pytest.raises(InputError, match=r"instruction_sha256 .*request keys differ"):
        rate(con, (edited, files[1]))
    with pytest.raises(InputError, match="model 'tilted'"):
        rate(con, files, profile="floor")
    with pytest.raises(InputError, match="kind 'rater'"):
        from runners.backends.simulated import simulated_selector
        from runners.run_judge import run_selector
        run_selector(con, dataset="tiny", judge="t", backend=simulated_selector("strong"),
                     backend_name="simulated", model="tilted", orders=1, progress=False)


def test_runtime_failure_gets_one_identical_retry_and_invalid_text_none(db, files):
    con = store.connect(db)
    flaky = Scripted("4", failures=1)
    rate(con, files, judge="flaky", backend=flaky, backend_name="test", limit=3, concurrency=3)
    calls = rows(con, "flaky")
    assert set(calls["status"]) == {"ok"} and set(calls["attempts"]) == {2} and set(calls["rating"]) == {4.0}
    assert set(flaky.seen.values()) == {2}
    prose = Scripted(text="I would say 4.")
    rate(con, files, judge="prose", backend=prose, backend_name="test", limit=3)
    calls = rows(con, "prose")
    assert set(calls["status"]) == {"parse_fail"} and set(calls["attempts"]) == {1}
    assert set(prose.seen.values()) == {1} and set(calls["raw_output"]) == {"I would say 4."}
    assert calls["rating"].isna().all() and calls["parse_note"].str.contains("not a rating").all()


def test_runtime_failures_are_recorded_then_retried_on_resume(db, files):
    con = store.connect(db)
    broken = Scripted(text="unspecified", failures=2)
    summary = rate(con, files, judge="b", backend=broken, backend_name="test", limit=2)
    calls = rows(con, "b")
    assert summary.statuses == {"runtime_fail": 2}
    assert calls["parse_note"].str.contains("ConnectionError: scripted failure 2").all()
    resumed = rate(con, files, judge="b", backend=broken, backend_name="test", limit=2)
    calls = rows(con, "b")
    assert resumed.statuses == {"abstained": 2} and len(calls) == 2 and set(calls["status"]) == {"abstained"}


def test_a_failure_that_carries_what_it_received_keeps_it(db, files):
    from runners.backends.base import BackendFailure

    class Cut(Scripted):
        def generate(self, request):
            raise BackendFailure("body over the cap", raw_output="4 and then a very long")

    con = store.connect(db)
    rate(con, files, judge="cut", backend=Cut(), backend_name="test", limit=1)
    call = rows(con, "cut").iloc[0]
    assert (call["status"], call["attempts"], call["raw_output"]) == ("runtime_fail", 2, "4 and then a very long")
    assert pd.isna(call["rating"]) and call["parse_note"] == "BackendFailure: body over the cap"


def run_cli(capsys, *args):
    code = run_rater.main(list(args))
    return code, capsys.readouterr().err


def test_cli_errors_are_clear_and_change_nothing(db, files, capsys, tmp_path):
    instruction, conditions = files
    base = ["--db", str(db), "--judge", "j", "--backend", "simulated", "--model", "tilted", "--quiet",
            "--instruction", str(instruction), "--conditions", str(conditions)]
    before = snapshot(db)
    code, err = run_cli(capsys, "--dataset", "nope", *base)
    assert code == 2 and "unknown dataset 'nope'" in err and "tiny" in err
    code, err = run_cli(capsys, "--dataset", "tiny", *base, "--condition", "nosuch")
    assert code == 2 and "unknown condition 'nosuch'" in err and "demos_a" in err
    code, err = run_cli(capsys, "--dataset", "tiny", *base, "--model", "nosuch")
    assert code == 2 and "unknown simulated rater profile 'nosuch'" in err
    on_alignment = tmp_path / "rubric_on_alignment.txt"  # alignment is on 0-1 here, the rubric on 1-5
    on_alignment.write_text(instruction.read_text().replace("outcome: rubric", "outcome: alignment", 1))
    code, err = run_cli(capsys, "--dataset", "tiny", *base[:-4], "--instruction", str(on_alignment))
    assert code == 2 and "consensus on the rubric's scale 1-5" in err
    bad_pool = tmp_path / "bad_pool.json"
    bad_pool.write_text(json.dumps({"conditions": {"d": {"demonstrations": {"pool": "zz", "k": 2}}}}))
    code, err = run_cli(capsys, "--dataset", "tiny", *base[:-2], "--conditions", str(bad_pool), "--condition", "d")
    assert code == 2 and "pool 'zz' has no consensus" in err and "a, b" in err
    bad_key = tmp_path / "bad_key.json"
    bad_key.write_text('{"conditions": {\n  "d": {"persona": "x",\n "temperature": 1}}}')
    code, err = run_cli(capsys, "--dataset", "tiny", *base[:-2], "--conditions", str(bad_key), "--condition", "d")
    assert code == 2 and f"{bad_key} line 2, field 'conditions.d.temperature'" in err
    bad_header = tmp_path / "bad_rubric.txt"
    bad_header.write_text(instruction.read_text().replace("scale: 1-5", "scale: 5-1"))
    code, err = run_cli(capsys, "--dataset", "tiny", *base[:-4], "--instruction", str(bad_header))
    assert code == 2 and f"{bad_header} line 1, field 'scale'" in err
    no_translation = tmp_path / "fr.json"
    no_translation.write_text(json.dumps({"conditions": {"fr": {"language": "fr"}}}))
    code, err = run_cli(capsys, "--dataset", "tiny", *base[:-2], "--conditions", str(no_translation),
                        "--condition", "fr")
    assert code == 2 and "no 'fr' translation" in err and "rubric_test_v1.fr.txt" in err
    reader = store.connect(db, read_only=True)
    path = store.load_candidates(reader, "tiny")["image_path"].iloc[2]
    reader.close()
    Path(path).unlink()
    code, err = run_cli(capsys, "--dataset", "tiny", *base)
    assert code == 2 and path in err and "not found" in err
    assert snapshot(db) == before


def test_a_translation_is_read_beside_the_instruction(db, files, tmp_path):
    instruction, _ = files
    french = instruction.with_name("rubric_test_v1.fr.txt")
    french.write_text(instruction.read_text().replace("language: en", "language: fr").replace(
        "Now rate this image.", "Notez maintenant cette image."))
    conditions = tmp_path / "fr.json"
    conditions.write_text(json.dumps({"conditions": {"default": {}, "fr": {"language": "fr"}}}))
    con = store.connect(db)
    requests = plan(con, files, ["default", "fr"], conditions_file=conditions)
    texts = {r.condition: "".join(v for k, v in r.segments() if k == "text") for r in requests}
    assert "Notez maintenant cette image." in texts["fr"] and "Now rate this image." in texts["default"]


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path, files):
    db = tmp_path / "k.duckdb"
    write_rating_dataset(db, tmp_path / "images", n_prompts=16, pool_sizes=(3, 4))  # 56 items
    env = slowed_env(tmp_path / "hook", "runners.backends.simulated_rater", "SimulatedRater", 0.03)
    cmd = [sys.executable, "-m", "runners.run_rater", "--db", str(db), "--dataset", "tiny", "--judge", "floor",
           "--backend", "simulated", "--model", "floor", "--instruction", str(files[0]),
           "--conditions", str(files[1]), "--condition", "default", "demos_a", "--concurrency", "2"]
    progress = killed_mid_run(cmd, env, total=112, at_least=20)
    assert re.search(rb"\d+/112 \[[0-9:]+<[0-9:?]+", progress), "progress bar with elapsed<remaining"
    con = store.connect(db)
    first = store.load_rating_calls(con, "tiny")
    con.close()
    assert 20 <= len(first) < 112, "killed mid-way"
    assert_resumed(cmd, env, db, first, 112, lambda con: store.load_rating_calls(con, "tiny"))


# ------------------------------------------------------------------ real backends


@pytest.fixture
def small_db(tmp_path):
    path = tmp_path / "s.duckdb"
    write_rating_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    return path


@pytest.mark.parametrize("kind", ["qwen3_vl", "smolvlm"])
def test_tiny_hf_models_rate_through_the_selectors_backend(kind, tiny_models, small_db, files):  # noqa: F811
    code = run_rater.main([
        "--db", str(small_db), "--dataset", "tiny", "--judge", kind, "--backend", "hf",
        "--model", str(tiny_models[kind]), "--instruction", str(files[0]), "--conditions", str(files[1]),
        "--condition", "default", "demos_a", "--limit", "2", "--max-new-tokens", "4", "--max-edge", "64",
        "--device", "cpu", "--quiet",
    ])
    assert code == 0
    con = store.connect(small_db)
    calls = store.load_rating_calls(con, "tiny")
    run = con.execute("SELECT kind, backend, model, model_revision, status FROM runs").fetchone()
    assert len(calls) == 4 and set(calls["condition"]) == {"default", "demos_a"}
    assert set(calls["status"]) == {"parse_fail"} and calls["rating"].isna().all()  # random weights: junk text
    assert calls["raw_output"].map(lambda t: isinstance(t, str)).all() and set(calls["attempts"]) == {1}
    assert run[:3] == ("rater", "hf", str(tiny_models[kind])) and run[4] == "finished"
    assert run[3].startswith("local fingerprint sha256:")


def test_hf_inputs_carry_the_demonstrations_then_the_item(tiny_models, small_db, files):  # noqa: F811
    from runners.backends.hf import HFSelector

    con = store.connect(small_db)
    request = next(r for r in plan(con, files, ["demos_a"]))
    con.close()
    smol = HFSelector(str(tiny_models["smolvlm"]), max_new_tokens=4, max_edge=64, device="cpu")
    content = smol.messages(request)[0]["content"]
    assert [c["type"] for c in content] == ["text", "image", "text", "image", "text", "image", "text"]
    assert tuple(smol.inputs(request)["pixel_values"].shape[:2]) == (1, 3)
    qwen = HFSelector(str(tiny_models["qwen3_vl"]), max_new_tokens=4, max_edge=48, device="cpu")
    assert qwen.generate(request) == qwen.generate(request)


def test_openai_backend_rates_against_the_local_server(server, small_db, files):  # noqa: F811
    script, url = server
    script.steps = [("ok", "4"), ("ok", "unspecified"), ("status", 503, {}), ("ok", ' {"rating": 2} '),
                    ("ok", "five")]
    code = run_rater.main([
        "--db", str(small_db), "--dataset", "tiny", "--judge", "api", "--backend", "openai", "--model", "m",
        "--base-url", url, "--instruction", str(files[0]), "--conditions", str(files[1]),
        "--condition", "default", "--limit", "4", "--max-edge", "32", "--quiet",
    ])
    assert code == 0
    con = store.connect(small_db)
    calls = store.load_rating_calls(con, "tiny").sort_values("created_at")
    assert list(calls["status"]) == ["ok", "abstained", "ok", "parse_fail"]
    assert list(calls["rating"].fillna(-1)) == [4.0, -1, 2.0, -1] and list(calls["attempts"]) == [1, 1, 2, 1]
    assert calls["raw_output"].iloc[3] == "five"
    assert script.bodies[2] == script.bodies[3]  # the one identical retry
    content = script.bodies[0]["messages"][0]["content"]
    assert [c["type"] for c in content] == ["text", "image_url", "text"]
    assert "Prompt: \"A festival scene number 0" in content[0]["text"] and "single integer" in content[2]["text"]
    assert (script.bodies[0]["temperature"], script.bodies[0]["max_tokens"]) == (0, 16)
    assert con.execute("SELECT kind FROM runs").fetchone()[0] == "rater"
