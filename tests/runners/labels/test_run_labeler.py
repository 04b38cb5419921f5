"""Attribute-judge runs: requests and keys, conditions, answers per attribute, resume, retries, CLI errors,
kill and resume, and the hf and openai backends."""

import json
import re
import sys

import pandas as pd
import pytest

from audit_core import store
from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, load_taxonomy
from audit_core.errors import InputError
from runners import run_labeler
from runners.backends.simulated_labeler import simulated_labeler
from runners.labels import protocol as label_protocol
from runners.labels.recorder import load_label_scope, plan_labels, record_labeler
from tests.support.labels import WEAK, write_label_dataset
from tests.support.recording import Scripted, assert_resumed, killed_mid_run, slowed_env
from tests.support.snapshots import snapshot

CONDITIONS = ("default", "no_label_list", "no_unspecified")


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "l.duckdb"
    write_label_dataset(path, tmp_path / "images")
    return path


def label(con, judge="j", profile="careful", conditions=("default",), **kwargs):
    backend = kwargs.pop("backend", None) or simulated_labeler(profile, store.load_gold_labels(con, "tiny"))
    return record_labeler(con, dataset="tiny", judge=judge, backend=backend,
                          backend_name=kwargs.pop("backend_name", "simulated"), model=kwargs.pop("model", profile),
                          conditions=conditions, progress=False, **kwargs)


def plan(con, conditions=CONDITIONS, judge="j", model="careful", conditions_file=label_protocol.DEFAULT_CONDITIONS,
         instruction=label_protocol.DEFAULT_INSTRUCTION, taxonomy=DEFAULT_TAXONOMY):
    scope = load_label_scope(con, dataset="tiny", limit=None)
    chosen = label_protocol.select_label_conditions(conditions_file, conditions)
    return plan_labels(scope, judge=judge, model=model, instruction=label_protocol.load_label_instruction(instruction),
                       taxonomy=load_taxonomy(taxonomy), conditions=chosen)[0]


def answers(con, judge="j"):
    return store.load_label_answers(con, "tiny").query("judge == @judge")


def calls(con, judge="j"):
    return con.execute("SELECT c.* FROM label_calls c JOIN runs r USING (run_id) WHERE r.judge = ? "
                       "ORDER BY condition, candidate_id", [judge]).df()


def test_one_call_per_image_and_condition_with_one_answer_per_attribute(db):
    con = store.connect(db)
    n_images = len(store.load_candidates(con, "tiny"))
    taxonomy = load_taxonomy()
    summary = label(con, conditions=CONDITIONS)
    got, recorded = answers(con), calls(con)
    assert summary.kind == "labeler" and summary.recorded == len(recorded) == 3 * n_images
    assert recorded["request_key"].is_unique and not recorded.duplicated(["condition", "candidate_id"]).any()
    assert len(got) == len(recorded) * len(taxonomy.attributes)
    assert got.groupby("request_key")["attribute"].apply(sorted).map(lambda n: n == sorted(taxonomy.names())).all()
    ok = got["status"] == "ok"
    assert got.loc[~ok, "label"].isna().all() and (got.loc[ok, "label"] == got.loc[ok, "answer"]).all()
    assert got["rationale"].str.startswith("SIMULATED").all()
    run = con.execute("SELECT * FROM runs WHERE judge = 'j'").df().iloc[0]
    config = json.loads(run["config_json"])
    assert (run["kind"], run["backend"], run["status"]) == ("labeler", "simulated", "finished")
    assert run["instruction_sha256"] == label_protocol.load_label_instruction().sha256
    assert run["model_revision"].startswith("simulated_labelers.json v1")
    assert config["taxonomy_sha256"] == taxonomy.sha256 and set(config["conditions"]) == set(CONDITIONS)
    shown = json.loads(recorded["input_json"].iloc[0])
    assert shown["image_size"] == [96, 96] and shown["taxonomy_sha256"] == taxonomy.sha256


def test_the_conditions_show_what_they_say_and_the_ablations_change_the_answers(db):
    con = store.connect(db)
    requests = {(r.condition, r.candidate_id): r for r in plan(con)}
    text = {c: "".join(v for k, v in requests[(c, "p000_SD35")].segments() if k == "text") for c in CONDITIONS}
    assert '"Latino_Hispanic"' in text["default"] and 'answer "unspecified"' in text["default"]
    assert "Latino_Hispanic" not in text["no_label_list"] and 'answer "unspecified"' in text["no_label_list"]
    assert '"Latino_Hispanic"' in text["no_unspecified"] and "unspecified" not in text["no_unspecified"]
    assert [k for k, _ in requests[("default", "p000_SD35")].segments()] == ["text", "image", "text"]
    label(con, conditions=CONDITIONS)
    label(con, judge="g", profile="guesser", conditions=("default",))
    got = answers(con)
    gold = store.load_gold_labels(con, "tiny").rename(columns={"label": "gold"})
    got = got.merge(gold, on=["candidate_id", "attribute"])
    share = got.groupby(["condition", "status"]).size().unstack(fill_value=0)
    assert share.loc["no_unspecified", "abstained"] == 0 and share.loc["default", "abstained"] > 0
    assert share.loc["no_label_list", "off_taxonomy"] > 0 and share.loc["default", "off_taxonomy"] == 0
    off = got[got["status"] == "off_taxonomy"]
    labels = {a.name: set(a.answers()) for a in load_taxonomy().attributes}
    assert all(a not in labels[attr] for a, attr in zip(off["answer"], off["attribute"]))  # kept, never coerced
    default = got[got["condition"] == "default"]
    weak = default["attribute"].isin(WEAK)
    assert (default.loc[weak, "status"] == "abstained").mean() > 0.6 > (default.loc[~weak, "status"] == "abstained").mean()
    visible = default[~weak & (default["status"] == "ok")]
    assert (visible["label"] == visible["gold"]).mean() > 0.7
    guesser = answers(con, "g")
    assert set(guesser["status"]) == {"ok"}


def test_request_keys_hash_instruction_condition_taxonomy_model_and_image(db, tmp_path):
    con = store.connect(db)
    base = {r.request_key for r in plan(con)}
    assert len(base) == 3 * len(store.load_candidates(con, "tiny"))  # one per image and condition
    assert base == {r.request_key for r in plan(con)}  # deterministic
    edited = tmp_path / "attributes_v2.txt"
    edited.write_text(label_protocol.DEFAULT_INSTRUCTION.read_text() + "Be brief.\n")
    other_taxonomy = tmp_path / "taxonomy.json"  # the dataset's content (a changed one is refused), other bytes
    other_taxonomy.write_text(DEFAULT_TAXONOMY.read_text() + "\n")
    for changed in (plan(con, instruction=edited), plan(con, model="guesser"), plan(con, judge="k"),
                    plan(con, taxonomy=other_taxonomy)):
        assert {r.request_key for r in changed}.isdisjoint(base)


def test_a_changed_condition_changes_only_its_keys_and_is_refused_until_replaced(db, tmp_path):
    con = store.connect(db)
    before = {r.request_key: (r.condition, r.candidate_id) for r in plan(con)}
    label(con, conditions=CONDITIONS)
    edited = json.loads(label_protocol.DEFAULT_CONDITIONS.read_text())
    edited["conditions"]["no_label_list"]["abstention"] = False
    edited_file = tmp_path / "attributes_v2.json"
    edited_file.write_text(json.dumps(edited))
    after = {r.request_key: (r.condition, r.candidate_id) for r in plan(con, conditions_file=edited_file)}
    changed = {before[k] for k in set(before) - set(after)}
    assert {c for c, _ in changed} == {"no_label_list"} and len(changed) == len(before) // 3
    edited["conditions"]["no_label_list"]["description"] = "reworded"  # not part of the definition
    edited_file.write_text(json.dumps(edited))
    assert {r.request_key for r in plan(con, conditions_file=edited_file)} == set(after)
    with pytest.raises(InputError, match=r"condition 'no_label_list'.*condition_sha256 changed.*--replace"):
        label(con, conditions=CONDITIONS, conditions_file=edited_file)
    assert len(calls(con)) == len(before)
    done = label(con, conditions=CONDITIONS, conditions_file=edited_file, replace=True)
    assert done.recorded == len(before) and set(calls(con)["request_key"]) == set(after)


def test_resume_skips_recorded_keys_and_conditions_resume_independently(db):
    con = store.connect(db)
    n_images = len(store.load_candidates(con, "tiny"))
    first = label(con, limit=5)
    kept = calls(con)
    again = label(con)
    assert (first.recorded, again.skipped, again.recorded) == (5, 5, n_images - 5)
    now = calls(con).set_index("request_key")
    assert list(now.loc[kept["request_key"], "raw_output"]) == list(kept["raw_output"])
    assert list(now.loc[kept["request_key"], "run_id"]) == list(kept["run_id"])
    both = label(con, conditions=("default", "no_unspecified"))
    assert (both.skipped, both.recorded) == (n_images, n_images)
    assert label(con, conditions=("default", "no_unspecified")).run_id is None
    assert len(answers(con)) == 2 * n_images * len(load_taxonomy().attributes)


def test_parse_failures_keep_the_raw_text_and_runtime_failures_are_retried_then_replaced(db):
    con = store.connect(db)
    prose = Scripted(text="A woman in a red dress.")
    label(con, judge="prose", backend=prose, backend_name="test", limit=2)
    failed = calls(con, "prose")
    assert set(failed["status"]) == {"parse_fail"} and set(failed["raw_output"]) == {"A woman in a red dress."}
    assert set(answers(con, "prose")["status"]) == {"missing"} and len(answers(con, "prose")) == 14
    flaky = Scripted(text=json.dumps({a.name: {"label": a.labels[0], "rationale": "r"}
                                      for a in load_taxonomy().attributes}), failures=2)
    summary = label(con, judge="flaky", backend=flaky, backend_name="test", limit=2)
    assert summary.statuses == {"runtime_fail": 2} and set(answers(con, "flaky")["status"]) == {"missing"}
    assert calls(con, "flaky")["parse_note"].str.contains("ConnectionError: scripted failure 2").all()
    resumed = label(con, judge="flaky", backend=flaky, backend_name="test", limit=2)
    assert resumed.statuses == {"ok": 2} and set(calls(con, "flaky")["attempts"]) == {1}
    assert len(answers(con, "flaky")) == 14 and set(answers(con, "flaky")["status"]) == {"ok"}


def test_a_taxonomy_other_than_the_datasets_is_refused(db, tmp_path):
    con = store.connect(db)
    taxonomy = json.loads(DEFAULT_TAXONOMY.read_text())
    taxonomy["attributes"] = taxonomy["attributes"][:2]
    fewer = tmp_path / "two.json"
    fewer.write_text(json.dumps(taxonomy))
    with pytest.raises(InputError, match=r"gold labels of taxonomy 'default'.*differs"):
        label(con, taxonomy_file=fewer)
    reformatted = tmp_path / "same.json"
    reformatted.write_text(json.dumps(json.loads(DEFAULT_TAXONOMY.read_text())))  # same content, other bytes
    assert label(con, taxonomy_file=reformatted, limit=1).recorded == 1


def run_cli(capsys, *args):
    code = run_labeler.main(list(args))
    return code, capsys.readouterr().err


def test_cli_errors_are_clear_and_change_nothing(db, capsys, tmp_path):
    base = ["--db", str(db), "--judge", "j", "--backend", "simulated", "--model", "careful", "--quiet"]
    before = snapshot(db)
    code, err = run_cli(capsys, "--dataset", "nope", *base)
    assert code == 2 and "unknown dataset 'nope'" in err and "tiny" in err
    code, err = run_cli(capsys, "--dataset", "tiny", *base, "--condition", "nosuch")
    assert code == 2 and "unknown condition 'nosuch'" in err and "no_label_list" in err
    code, err = run_cli(capsys, "--dataset", "tiny", *base[:-3], "--model", "nosuch")
    assert code == 2 and "unknown simulated labeler profile 'nosuch'" in err and "careful" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"conditions": {\n  "x": {"label_list": "yes"}}}')
    code, err = run_cli(capsys, "--dataset", "tiny", *base, "--conditions", str(bad), "--condition", "x")
    assert code == 2 and f"{bad} line 2, field 'conditions.x.label_list'" in err
    header = tmp_path / "bad.txt"
    header.write_text(label_protocol.DEFAULT_INSTRUCTION.read_text().replace("{labels}", "{label_list}", 1))
    code, err = run_cli(capsys, "--dataset", "tiny", *base, "--instruction", str(header))
    assert code == 2 and f"{header} line 2, field 'labels'" in err
    with pytest.raises(SystemExit) as usage:  # a usage error, before anything is opened
        run_labeler.main(["--dataset", "tiny", *base[:-5], "--backend", "openai", "--model", "m", "--structured"])
    assert usage.value.code == 2 and "--structured is not offered for attribute judges" in capsys.readouterr().err
    code, err = run_cli(capsys, "--dataset", "tiny", *base, "--taxonomy", str(tmp_path / "none.json"))
    assert code == 2 and "cannot read the taxonomy" in err
    assert snapshot(db) == before


def test_the_simulated_labeler_needs_gold_labels(tmp_path, capsys):
    from tests.support.pools import write_tiny_dataset

    path = tmp_path / "n.duckdb"
    write_tiny_dataset(path, tmp_path / "images", n_prompts=2)
    code, err = run_cli(capsys, "--db", str(path), "--dataset", "tiny", "--judge", "j", "--backend", "simulated",
                        "--model", "careful", "--quiet")
    assert code == 2 and "needs gold labels" in err


def test_sigkill_mid_run_then_resume_loses_nothing(tmp_path):
    db = tmp_path / "k.duckdb"
    write_label_dataset(db, tmp_path / "images", n_prompts=16, pool_sizes=(3, 4))  # 56 images
    env = slowed_env(tmp_path / "hook", "runners.backends.simulated_labeler", "SimulatedLabeler", 0.03)
    cmd = [sys.executable, "-m", "runners.run_labeler", "--db", str(db), "--dataset", "tiny", "--judge", "careful",
           "--backend", "simulated", "--model", "careful", "--taxonomy", str(DEFAULT_TAXONOMY),
           "--condition", "default", "no_unspecified", "--concurrency", "2"]
    progress = killed_mid_run(cmd, env, total=112, at_least=20)
    assert re.search(rb"\d+/112 \[[0-9:]+<[0-9:?]+", progress), "progress bar with elapsed<remaining"
    con = store.connect(db)
    first = calls(con, "careful")
    first_answers = len(answers(con, "careful"))
    con.close()
    assert 20 <= len(first) < 112, "killed mid-way"
    assert first_answers == 7 * len(first)  # a call and its answers land together
    assert_resumed(cmd, env, db, first, 112, lambda con: calls(con, "careful"))
    con = store.connect(db, read_only=True)
    assert len(answers(con, "careful")) == 7 * 112
    con.close()


# ------------------------------------------------------------------ real backends


@pytest.fixture
def small_db(tmp_path):
    path = tmp_path / "s.duckdb"
    write_label_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    return path


@pytest.mark.parametrize("kind", ["qwen3_vl", "smolvlm"])
def test_tiny_hf_models_label_through_the_selectors_backend(kind, tiny_models, small_db):  # noqa: F811
    code = run_labeler.main([
        "--db", str(small_db), "--dataset", "tiny", "--judge", kind, "--backend", "hf",
        "--model", str(tiny_models[kind]), "--condition", "default", "no_label_list", "--limit", "2",
        "--max-new-tokens", "4", "--max-edge", "64", "--device", "cpu", "--quiet",
    ])
    assert code == 0
    con = store.connect(small_db)
    recorded, got = calls(con, kind), answers(con, kind)
    run = con.execute("SELECT kind, backend, model, model_revision, status FROM runs").fetchone()
    assert len(recorded) == 4 and set(recorded["condition"]) == {"default", "no_label_list"}
    assert set(recorded["status"]) == {"parse_fail"}  # random weights: junk text
    assert recorded["raw_output"].map(lambda t: isinstance(t, str)).all() and set(recorded["attempts"]) == {1}
    assert len(got) == 4 * 7 and set(got["status"]) == {"missing"} and got["label"].isna().all()
    assert run[:3] == ("labeler", "hf", str(tiny_models[kind])) and run[4] == "finished"
    assert run[3].startswith("local fingerprint sha256:")


def test_openai_backend_labels_against_the_local_server(server, small_db):  # noqa: F811
    script, url = server
    taxonomy = load_taxonomy()
    valid = {a.name: {"label": a.labels[0], "rationale": f"evidence for {a.name}"} for a in taxonomy.attributes}
    drifted = {**valid, "race": {"label": "black", "rationale": "skin tone"},
               "religion": {"label": "unspecified", "rationale": "no symbol"}}
    script.steps = [("ok", json.dumps(valid)), ("ok", "She looks like a nurse."), ("status", 503, {}),
                    ("ok", json.dumps(drifted))]
    code = run_labeler.main([
        "--db", str(small_db), "--dataset", "tiny", "--judge", "api", "--backend", "openai", "--model", "m",
        "--base-url", url, "--limit", "3", "--max-edge", "32", "--quiet",
    ])
    assert code == 0
    con = store.connect(small_db)
    recorded = calls(con, "api").sort_values("created_at")
    assert list(recorded["status"]) == ["ok", "parse_fail", "ok"] and list(recorded["attempts"]) == [1, 1, 2]
    assert recorded["raw_output"].iloc[1] == "She looks like a nurse."
    got = answers(con, "api").set_index(["request_key", "attribute"])
    last = recorded["request_key"].iloc[2]
    assert got.loc[(last, "race"), ["status", "answer"]].tolist() == ["off_taxonomy", "black"]
    assert pd.isna(got.loc[(last, "race"), "label"]) and got.loc[(last, "race"), "rationale"] == "skin tone"
    assert got.loc[(last, "religion"), "status"] == "abstained" and got.loc[(last, "gender"), "label"] == "male"
    assert script.bodies[2] == script.bodies[3]  # the one identical retry
    content = script.bodies[0]["messages"][0]["content"]
    assert [c["type"] for c in content] == ["text", "image_url", "text"]
    assert '"profession"' in content[2]["text"] and "rationale" in content[2]["text"]
    assert (script.bodies[0]["temperature"], script.bodies[0]["max_tokens"]) == (0, 512)
