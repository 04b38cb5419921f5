"""The CLIP zero-shot label baseline with the tiny random open_clip towers: prompts from the templates file,
argmax of the mean cosine checked against the content scorer's own cosines, recorded as a labeler run."""

import json
import re

import numpy as np
import pytest
import torch

from audit_core import store
from audit_core.attributes.taxonomy import load_taxonomy
from audit_core.errors import InputError
from runners import score
from runners.backends.clip import ClipScorer, zero_shot_classifier
from runners.labels.clip_labels import DEFAULT_TEMPLATES, ZeroShotLabeler, load_label_prompts, record_clip_labels
from tests.support.clip import TINY
from tests.support.labels import write_label_dataset
from tests.support.snapshots import snapshot


@pytest.fixture(autouse=True)
def one_thread():
    """The towers are tiny: one thread each, or contention with other processes costs 20x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "c.duckdb"
    write_label_dataset(path, tmp_path / "images", n_prompts=2, pool_sizes=(3,))
    return path


def test_prompts_come_from_the_templates_file():
    prompts = load_label_prompts(DEFAULT_TEMPLATES, load_taxonomy()).prompts
    assert prompts["gender"]["female"] == ("a photo of a female person",)
    assert prompts["race"]["Latino_Hispanic"] == ("a photo of a Latino or Hispanic person",)
    assert prompts["profession"]["engineer"] == ("a photo of an engineer",)
    assert prompts["disability"]["dwarfism"] == ("a photo of a person with dwarfism",)
    assert list(prompts) == list(load_taxonomy().names())


def test_bad_templates_are_refused_naming_the_field(tmp_path):
    taxonomy = load_taxonomy()
    cases = [({"templates": {"gender": ["a {label}"]}}, "templates.race"),
             ({"templates": {"*": ["a photo"]}}, "templates.*"),
             ({"templates": {"*": "a {label}"}, "label_text": {"race": {"Latino": "x"}}}, "label_text.race")]
    for doc, where in cases:
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(InputError, match=re.escape(f"field '{where}'")):
            load_label_prompts(path, taxonomy)


def test_the_answer_is_the_argmax_of_the_scorers_own_cosines(tiny_clip, db):  # noqa: F811
    _, checkpoint = tiny_clip
    taxonomy = load_taxonomy()
    prompts = load_label_prompts(DEFAULT_TEMPLATES, taxonomy)
    scorer = ClipScorer(TINY, pretrained=str(checkpoint), device="cpu", batch_size=2)
    backend = ZeroShotLabeler(zero_shot_classifier(scorer, prompts.flat()), prompts, scorer.model_revision())
    con = store.connect(db)
    summary = record_clip_labels(con, dataset="tiny", judge="clip-zero-shot", backend=backend, model=TINY,
                                 weights=str(checkpoint), progress=False)
    images = store.load_candidates(con, "tiny")
    got = store.load_label_answers(con, "tiny")
    assert summary.kind == "labeler" and summary.recorded == len(images)
    assert set(got["status"]) == {"ok"} and len(got) == len(images) * len(taxonomy.attributes)
    assert (got["label"] == got["answer"]).all() and got["rationale"].str.startswith("CLIP zero-shot: score").all()
    # Independent: the content scorer's cosine of each filled prompt with each image, alone.
    picked = got.set_index(["candidate_id", "attribute"])["label"]
    paths = list(images["image_path"])
    cosine = {p: scorer.score(p, paths) for p in prompts.flat()}
    for i, cid in enumerate(images["candidate_id"]):
        for a in taxonomy.attributes:
            means = [np.mean([cosine[p][i] for p in prompts.prompts[a.name][x]]) for x in a.labels]
            assert picked[(cid, a.name)] == a.labels[int(np.argmax(means))]
    raw = json.loads(con.execute("SELECT raw_output FROM label_calls LIMIT 1").fetchone()[0])
    assert set(raw) == set(taxonomy.names()) and set(raw["age"]) == set(taxonomy.attribute("age").labels)
    run = con.execute("SELECT kind, backend, judge, model, instruction_sha256, status, model_revision FROM runs").fetchone()
    assert run[:4] == ("labeler", "clip", "clip-zero-shot", TINY) and run[5] == "finished"
    assert run[4] == prompts.sha256 and "checkpoint sha256:" in run[6]
    assert set(con.execute("SELECT condition FROM label_calls").fetchall()) == {("default",)}
    again = record_clip_labels(con, dataset="tiny", judge="clip-zero-shot", backend=backend, model=TINY,
                               weights=str(checkpoint), progress=False)
    assert (again.run_id, again.skipped) == (None, len(images))  # resume: every key recorded


def test_score_cli_labels_task_records_and_refuses_changed_templates(tiny_clip, db, tmp_path, capsys):  # noqa: F811
    _, checkpoint = tiny_clip
    base = ["--db", str(db), "--dataset", "tiny", "--scorer", "zs", "--backend", "clip", "--model", TINY,
            "--pretrained", str(checkpoint), "--device", "cpu", "--task", "labels", "--quiet"]
    assert score.main(base + ["--limit", "2"]) == 0
    assert "2 recorded now" in capsys.readouterr().out
    edited = tmp_path / "clip_labels_v2.json"
    doc = json.loads(DEFAULT_TEMPLATES.read_text())
    doc["templates"]["*"] = ["a picture of a {label} person"]
    edited.write_text(json.dumps(doc))
    before = snapshot(db)
    assert score.main(base + ["--templates", str(edited)]) == 2
    assert "instruction_sha256" in capsys.readouterr().err and snapshot(db) == before
    with pytest.raises(SystemExit) as usage:
        score.main([*base[:7], "simulated", "--model", "content", "--task", "labels"])
    assert usage.value.code == 2 and "--task labels needs --backend clip" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        score.main([*base[:7], "simulated", "--model", "content", "--limit", "2"])
    assert usage.value.code == 2 and "go with --task labels" in capsys.readouterr().err
    assert score.main(base) == 0 and "already recorded" in capsys.readouterr().out
    con = store.connect(db, read_only=True)
    assert con.execute("SELECT count(*) FROM label_calls").fetchone() == con.execute(
        "SELECT count(*) FROM candidates").fetchone()
