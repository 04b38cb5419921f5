"""Attribute-judge data through the table contract: gold labels (--labels), recorded answers
(--labeler), the taxonomy (--taxonomy), and `runners.analyze` on the result.

A small study built here: two prompts with two images each, gold labels for gender and
profession, and one judge whose answers hold every status (a label, the abstention label, a
label in another case, an empty field). Bad input is refused naming file, line and field, with
exit status 2 and the database as it was.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from audit_core import store
from audit_core.attributes.audit import ATTRIBUTE_COLUMNS, CONFUSION_COLUMNS
from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY
from runners import analyze, ingest
from tests.support.snapshots import snapshot
from tests.support.tables import write_table

IMAGES = ["p1_a", "p1_b", "p2_a", "p2_b"]
CONTRACT_COLUMNS = ["judge", "condition", "attribute", "n", "answered", "coverage", "accuracy_miss", "accuracy_miss_lo",
                    "accuracy_miss_hi", "accuracy_exclude", "accuracy_exclude_lo", "accuracy_exclude_hi", "macro_f1",
                    "off_taxonomy"]


def pool_rows() -> list[dict]:
    return [{"prompt_id": cid[:2], "prompt": f"A portrait of a {'doctor' if cid < 'p2' else 'nurse'}",
             "candidate_id": cid} for cid in IMAGES]


def gold_rows() -> list[dict]:
    genders = {"p1_a": "male", "p1_b": "female", "p2_a": "female", "p2_b": "male"}
    return ([{"candidate_id": c, "attribute": "gender", "label": g} for c, g in genders.items()]
            + [{"candidate_id": c, "attribute": "profession", "label": "doctor" if c < "p2" else "nurse"} for c in IMAGES])


def answer_rows() -> list[dict]:
    return [
        {"candidate_id": "p1_a", "attribute": "gender", "label": "male", "rationale": "<b>beard</b>"},
        {"candidate_id": "p1_b", "attribute": "gender", "label": "Female"},
        {"candidate_id": "p2_a", "attribute": "gender", "label": "unspecified", "rationale": "face hidden"},
        {"candidate_id": "p2_b", "attribute": "gender", "label": None},
        {"candidate_id": "p1_a", "attribute": "profession", "label": "doctor"},
        {"candidate_id": "p2_a", "attribute": "profession", "label": "teacher"},
        {"candidate_id": "p1_a", "attribute": "profession", "label": "medical doctor", "condition": "no_label_list"},
    ]


def run_ingest(db: Path, tmp: Path, *extra: str, ext: str = "csv") -> int:
    pools = write_table(tmp / f"pools.{ext}", pool_rows())
    return ingest.main(["table", "--pools", str(pools), "--db", str(db), "--dataset", "people", *extra])


def files(tmp: Path, ext: str = "csv", gold: list[dict] | None = None, answers: list[dict] | None = None) -> list[str]:
    labels = write_table(tmp / f"gold.{ext}", gold if gold is not None else gold_rows())
    judge = write_table(tmp / f"judge.{ext}", answers if answers is not None else answer_rows())
    return ["--labels", str(labels), "--labeler", f"judge={judge}"]


@pytest.mark.parametrize("ext", ["csv", "jsonl"])
def test_gold_labels_and_answers_are_stored_with_their_status(ext, tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, tmp_path, *files(tmp_path, ext), ext=ext) == 0
    out = capsys.readouterr().out
    assert "gold labels: 8 on 4 images, taxonomy default v1" in out and "the attribute audit uses the gold labels" in out
    assert "labeler judge: created, 5 calls, 7 answers" in out
    con = store.connect(db, read_only=True)
    try:
        gold = store.load_gold_labels(con, "people")
        taxonomy = store.load_taxonomy(con, "people")
        answers = store.load_label_answers(con, "people").set_index(["candidate_id", "condition", "attribute"])
        runs = store.load_runs(con, "people")
    finally:
        con.close()
    assert sorted(gold.itertuples(index=False, name=None)) == sorted(
        (r["candidate_id"], r["attribute"], r["label"]) for r in gold_rows())
    assert taxonomy.sha256 == hashlib.sha256(DEFAULT_TAXONOMY.read_bytes()).hexdigest()
    assert taxonomy.names() == ("gender", "race", "age", "religion", "culture", "disability", "profession")
    expected = {("p1_a", "default", "gender"): ("ok", "male", "male"),
                ("p1_b", "default", "gender"): ("off_taxonomy", None, "Female"),
                ("p2_a", "default", "gender"): ("abstained", None, "unspecified"),
                ("p2_b", "default", "gender"): ("missing", None, None),
                ("p2_a", "default", "profession"): ("ok", "teacher", "teacher"),
                ("p1_a", "no_label_list", "profession"): ("off_taxonomy", None, "medical doctor")}
    for key, (status, label, given) in expected.items():
        row = answers.loc[key]
        assert (row["status"], row["label"] if isinstance(row["label"], str) else None,
                row["answer"] if isinstance(row["answer"], str) else None) == (status, label, given)
    assert answers.loc[("p1_a", "default", "gender"), "rationale"] == "<b>beard</b>"
    assert runs.iloc[0]["kind"] == "labeler" and json.loads(runs.iloc[0]["config_json"])["taxonomy"]["version"] == "v1"
    before = snapshot(db)
    assert run_ingest(db, tmp_path, *files(tmp_path, ext), ext=ext) == 0  # the same files again change nothing
    assert "labeler judge: unchanged" in capsys.readouterr().out
    assert snapshot(db) == before


def test_analyze_writes_the_attribute_tables_with_the_contract_columns(tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, tmp_path, *files(tmp_path)) == 0
    out = tmp_path / "out"
    assert analyze.main(["--db", str(db), "--dataset", "people", "--out", str(out), "--resamples", "200"]) == 0
    assert "no selection audit" in capsys.readouterr().out
    cells = pd.read_csv(out / "attributes.csv")
    assert list(cells.columns[: len(CONTRACT_COLUMNS)]) == CONTRACT_COLUMNS and list(cells.columns) == list(ATTRIBUTE_COLUMNS)
    confusion = pd.read_csv(out / "confusion.csv")
    assert list(confusion.columns) == list(CONFUSION_COLUMNS)
    gender = cells[(cells["condition"] == "default") & (cells["attribute"] == "gender")].iloc[0]
    assert (gender["n"], gender["answered"]) == (4, 1)
    assert gender["accuracy_miss"] == pytest.approx(1 / 4) and gender["accuracy_exclude"] == pytest.approx(1 / 3)
    counts = confusion[(confusion["condition"] == "default") & (confusion["attribute"] == "gender")]
    assert counts["count"].sum() == 4 and counts.set_index(["gold", "predicted"]).loc[("female", "(off taxonomy)"), "count"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policies"] is None and summary["attributes"]["taxonomy"]["name"] == "default"
    assert len(summary["attributes"]["cells"]) == len(cells) and summary["attributes"]["macro"][0]["judge"] == "judge"


@pytest.mark.parametrize("gold_edit, answer_edit, located", [
    ({2: {"label": "Female"}}, {}, ("gold.csv line 4", "field 'label'", "'Female' is not a label of 'gender'")),
    ({0: {"candidate_id": "p9_z"}}, {}, ("gold.csv line 2", "field 'candidate_id'", "unknown candidate 'p9_z'")),
    ({1: {"attribute": "mood"}}, {}, ("gold.csv line 3", "field 'attribute'", "'mood' is not an attribute")),
    ({3: {"candidate_id": "p1_a"}}, {}, ("gold.csv line 5", "field 'attribute'", "two gold labels for 'gender'")),
    ({}, {4: {"candidate_id": "nobody"}}, ("judge.csv line 6", "field 'candidate_id'", "unknown candidate id 'nobody'")),
    ({}, {5: {"attribute": "height"}}, ("judge.csv line 7", "field 'attribute'", "'height' is not an attribute")),
    ({}, {5: {"candidate_id": "p1_a", "attribute": "profession"}}, ("judge.csv line 7", "field 'attribute'",
                                                                    "duplicate answer")),
])
def test_bad_labels_are_refused_naming_file_line_and_field(gold_edit, answer_edit, located, tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, tmp_path, *files(tmp_path)) == 0
    capsys.readouterr()
    before = snapshot(db)
    gold = [{**row, **gold_edit.get(i, {})} for i, row in enumerate(gold_rows())]
    answers = [{**row, **answer_edit.get(i, {})} for i, row in enumerate(answer_rows())]
    bad = tmp_path / "bad"
    bad.mkdir()
    assert ingest.main(["table", "--pools", str(write_table(bad / "pools.csv", pool_rows())), "--db", str(db),
                        "--dataset", "people", "--replace", *files(bad, gold=gold, answers=answers)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "the database is unchanged" in err
    first = err.splitlines()[0]
    assert all(part in first for part in located), first
    assert snapshot(db) == before
    fresh = tmp_path / "fresh.duckdb"  # a database the failed ingest would have created is not left behind
    assert ingest.main(["table", "--pools", str(bad / "pools.csv"), "--db", str(fresh), "--dataset", "people",
                        *files(bad, gold=gold, answers=answers)]) == 2
    assert not fresh.exists()


@pytest.mark.parametrize("text, located", [
    ("{not json", ("tax.json", "not a JSON taxonomy")),
    (json.dumps({"name": "t", "attributes": [{"name": "gender", "labels": ["male", "female"], "abstention": "skip"}]}),
     ("tax.json", "attributes[0].abstention", "expected one of miss, exclude")),
    (json.dumps({"name": "t", "attributes": [{"name": "gender", "labels": ["male", "male"]}]}),
     ("tax.json", "attributes[0].labels", "listed twice")),
])
def test_a_bad_taxonomy_file_is_refused(text, located, tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, tmp_path, *files(tmp_path)) == 0
    capsys.readouterr()
    before = snapshot(db)
    taxonomy = tmp_path / "tax.json"
    taxonomy.write_text(text)
    assert run_ingest(db, tmp_path, *files(tmp_path), "--taxonomy", str(taxonomy), "--replace") == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert all(part in first for part in located), first
    assert snapshot(db) == before


def test_another_taxonomy_checks_the_labels_and_is_stored(tmp_path, capsys):
    taxonomy = tmp_path / "tax.json"
    taxonomy.write_text(json.dumps({"name": "mine", "version": "2", "attributes": [
        {"name": "gender", "labels": ["male", "female", "Female"], "abstain": "unclear", "abstention": "exclude"}]}))
    gold = [r for r in gold_rows() if r["attribute"] == "gender"]
    answers = [r for r in answer_rows() if r["attribute"] == "gender"]
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, tmp_path, *files(tmp_path, gold=gold, answers=answers), "--taxonomy", str(taxonomy)) == 0
    con = store.connect(db, read_only=True)
    try:
        stored = store.load_taxonomy(con, "people")
        answers = store.load_label_answers(con, "people").set_index("candidate_id")["status"]
    finally:
        con.close()
    assert (stored.name, stored.version, stored.attribute("gender").abstain) == ("mine", "2", "unclear")
    # under this taxonomy 'Female' is a label and 'unspecified' is off it
    assert answers["p1_b"] == "ok" and answers["p2_a"] == "off_taxonomy"
