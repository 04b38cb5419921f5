"""The attribute audit (DESIGN §4c) on small answer tables built here: known answers, scikit-learn's
macro-F1 and confusion matrix, and intervals against a direct numpy bootstrap over images."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import confusion_matrix, f1_score

from audit_core import Resampling
from audit_core.attributes.audit import (
    ATTRIBUTE_COLUMNS,
    MISSING,
    OFF_TAXONOMY,
    AttributeData,
    audit_attributes,
    disagreements,
)
from audit_core.attributes.taxonomy import load_taxonomy

TAXONOMY = load_taxonomy()
GENDER, AGE, RELIGION = (TAXONOMY.attribute(a) for a in ("gender", "age", "religion"))
IMAGES = [f"img{i:02d}" for i in range(24)]
RESAMPLES = 500


def gold_frame(rng: np.random.Generator) -> pd.DataFrame:
    """A gold label per image for gender, age and religion."""
    return pd.DataFrame([{"candidate_id": cid, "attribute": a.name, "label": a.labels[int(rng.integers(len(a.labels)))]}
                         for cid in IMAGES for a in (GENDER, AGE, RELIGION)])


def answer(judge: str, cid: str, attribute: str, status: str, label: str | None = None, answer: str | None = None,
           condition: str = "default") -> dict:
    return {"judge": judge, "backend": "import", "condition": condition, "candidate_id": cid, "attribute": attribute,
            "status": status, "label": label if status == "ok" else None, "answer": answer if answer is not None else label,
            "rationale": f"because <b>{judge}</b>", "call_status": "ok", "raw_output": "{}", "parse_note": None}


def random_answers(judge: str, gold: pd.DataFrame, rng: np.random.Generator) -> list[dict]:
    """Every status in the mix: right and wrong labels, abstentions, junk, missing fields."""
    rows = []
    for cid, attribute, truth in gold.itertuples(index=False, name=None):
        a = TAXONOMY.attribute(attribute)
        u = rng.random()
        if u < 0.45:
            rows.append(answer(judge, cid, attribute, "ok", truth))
        elif u < 0.7:
            rows.append(answer(judge, cid, attribute, "ok", a.labels[int(rng.integers(len(a.labels)))]))
        elif u < 0.85:
            rows.append(answer(judge, cid, attribute, "abstained", answer=a.abstain))
        elif u < 0.95:
            rows.append(answer(judge, cid, attribute, "off_taxonomy", answer=truth.upper()))
        else:
            rows.append(answer(judge, cid, attribute, "missing"))
    return rows


def data_of(answers: list[dict], gold: pd.DataFrame) -> AttributeData:
    candidates = pd.DataFrame({"candidate_id": IMAGES, "prompt_id": "p", "prompt": "a person", "source_model": None,
                               "image_path": None})
    return AttributeData(dataset_id="t", taxonomy=TAXONOMY, gold=gold, answers=pd.DataFrame(answers),
                         candidates=candidates)


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(7)
    gold = gold_frame(rng)
    answers = random_answers("mixed", gold, rng) + random_answers("other", gold, rng)
    data = data_of(answers, gold)
    return data, audit_attributes(data, Resampling(RESAMPLES, 3))


def cell(result, judge: str, attribute: str, condition: str = "default") -> pd.Series:
    rows = result.cells
    return rows[(rows["judge"] == judge) & (rows["attribute"] == attribute) & (rows["condition"] == condition)].iloc[0]


def test_a_judge_abstaining_on_everything_has_no_coverage_and_an_undefined_excluded_accuracy():
    gold = gold_frame(np.random.default_rng(0))
    rows = [answer("silent", cid, a, "abstained", answer=TAXONOMY.attribute(a).abstain)
            for cid, a, _ in gold.itertuples(index=False, name=None)]
    result = audit_attributes(data_of(rows, gold), Resampling(RESAMPLES))
    assert list(result.cells.columns) == list(ATTRIBUTE_COLUMNS)
    assert len(result.cells) == 3 and (result.cells["n"] == len(IMAGES)).all()
    assert (result.cells["coverage"] == 0).all() and (result.cells["accuracy_miss"] == 0).all()
    assert result.cells["accuracy_exclude"].isna().all()
    assert result.cells[["accuracy_exclude_lo", "accuracy_exclude_hi"]].isna().all().all()
    assert (result.cells["abstain_share"] == 1).all()
    macro = result.macro.iloc[0]
    assert macro["attributes"] == 3 and macro["coverage"] == 0 and np.isnan(macro["accuracy_exclude"])


def test_a_judge_perfect_when_it_answers_has_excluded_accuracy_one():
    gold = gold_frame(np.random.default_rng(1))
    rows = [answer("perfect", cid, a, "abstained", answer="unspecified") if k % 4 == 0 else answer("perfect", cid, a, "ok", label)
            for k, (cid, a, label) in enumerate(gold.itertuples(index=False, name=None))]
    result = audit_attributes(data_of(rows, gold), Resampling(RESAMPLES))
    cells = result.cells.set_index("attribute")
    assert (cells["accuracy_exclude"] == 1).all() and (cells["accuracy_exclude_lo"] == 1).all()
    assert (cells["accuracy_miss"] == cells["answered"] / cells["n"]).all()
    assert (cells["accuracy_miss"] < 1).all() and (cells["coverage"] == cells["accuracy_miss"]).all()


def test_junk_and_missing_answers_stay_in_the_excluded_denominator():
    gold = pd.DataFrame([{"candidate_id": IMAGES[i], "attribute": "gender", "label": "male"} for i in range(5)])
    rows = [answer("j", IMAGES[0], "gender", "ok", "male"), answer("j", IMAGES[1], "gender", "ok", "female"),
            answer("j", IMAGES[2], "gender", "abstained", answer="unspecified"),
            answer("j", IMAGES[3], "gender", "off_taxonomy", answer="Male"), answer("j", IMAGES[4], "gender", "missing")]
    c = audit_attributes(data_of(rows, gold), Resampling(0)).cells.iloc[0]
    assert (c["n"], c["answered"], c["correct"], c["abstained"], c["missing"]) == (5, 2, 1, 1, 1)
    assert c["accuracy_miss"] == pytest.approx(1 / 5) and c["accuracy_exclude"] == pytest.approx(1 / 4)
    assert c["coverage"] == pytest.approx(2 / 5) and c["off_taxonomy"] == pytest.approx(1 / 5)
    wrong = disagreements(data_of(rows, gold))
    assert set(wrong["candidate_id"]) == {IMAGES[1], IMAGES[3], IMAGES[4]}  # an abstention is no disagreement
    assert set(disagreements(data_of(rows, gold), include_abstained=True)["candidate_id"]) == set(IMAGES[1:5])
    assert wrong.set_index("candidate_id").loc[IMAGES[3], "answer"] == "Male"  # kept as given, never coerced


def test_macro_f1_and_confusion_match_scikit_learn(mixed):
    data, result = mixed
    answers = data.answers.merge(data.gold.rename(columns={"label": "gold"}), on=["candidate_id", "attribute"])
    predicted = np.where(answers["status"] == "ok", answers["label"],
                         np.where(answers["status"] == "abstained", "unspecified",
                                  np.where(answers["status"] == "off_taxonomy", OFF_TAXONOMY, MISSING)))
    answers = answers.assign(predicted=predicted)
    checked = 0
    for (judge, attribute), part in answers.groupby(["judge", "attribute"]):
        present = sorted(set(part["gold"]))
        expected = f1_score(part["gold"], part["predicted"], labels=present, average="macro", zero_division=0)
        assert cell(result, judge, attribute)["macro_f1"] == pytest.approx(expected, abs=1e-12)
        a = TAXONOMY.attribute(attribute)
        columns = [*a.answers(), OFF_TAXONOMY, MISSING]
        rows = [g for g in a.answers() if g in present]
        matrix = confusion_matrix(part["gold"], part["predicted"], labels=columns)[[columns.index(g) for g in rows]]
        ours = result.confusion[(result.confusion["judge"] == judge) & (result.confusion["attribute"] == attribute)]
        grid = ours.pivot(index="gold", columns="predicted", values="count").reindex(index=rows, columns=columns)
        np.testing.assert_array_equal(grid.to_numpy(), matrix)
        checked += 1
    assert checked == 6


def test_intervals_match_a_direct_numpy_bootstrap_over_images(mixed):
    data, result = mixed
    images = np.array(sorted(data.gold["candidate_id"].unique()))  # every scored image, sorted by id
    draws = np.random.default_rng(3).integers(0, len(images), size=(RESAMPLES, len(images)))
    answers = data.answers.merge(data.gold.rename(columns={"label": "gold"}), on=["candidate_id", "attribute"])
    for (judge, attribute), part in answers.groupby(["judge", "attribute"]):
        by_image = part.set_index("candidate_id").reindex(images)
        correct = ((by_image["status"] == "ok") & (by_image["label"] == by_image["gold"])).to_numpy(float)
        kept = (by_image["status"] != "abstained").to_numpy(float)
        miss = correct[draws].sum(axis=1) / len(images)
        with np.errstate(invalid="ignore", divide="ignore"):
            exclude = correct[draws].sum(axis=1) / kept[draws].sum(axis=1)
        c = cell(result, judge, attribute)
        assert (c["accuracy_miss_lo"], c["accuracy_miss_hi"]) == pytest.approx(tuple(np.percentile(miss, [2.5, 97.5])))
        assert (c["accuracy_exclude_lo"], c["accuracy_exclude_hi"]) == pytest.approx(
            tuple(np.nanpercentile(exclude, [2.5, 97.5])))
        assert c["accuracy_miss_lo"] <= c["accuracy_miss"] <= c["accuracy_miss_hi"]


def test_accuracy_by_gold_label_and_macro_means_over_populated_cells(mixed):
    data, result = mixed
    rows = result.by_label[(result.by_label["judge"] == "mixed") & (result.by_label["attribute"] == "age")]
    c = cell(result, "mixed", "age")
    assert rows["n"].sum() == c["n"] and (rows["n"] * rows["accuracy_miss"]).sum() == pytest.approx(c["correct"])
    for gold, n in rows.set_index("gold")["n"].items():
        assert n == ((data.gold["attribute"] == "age") & (data.gold["label"] == gold)).sum()
    # a judge asked about gender only: its macro means are over that one cell
    gold = data.gold
    only = [answer("narrow", cid, "gender", "ok", label) for cid, a, label in gold.itertuples(index=False, name=None)
            if a == "gender"]
    narrow = audit_attributes(data_of(only + data.answers.to_dict("records"), gold), Resampling(0))
    macro = narrow.macro.set_index("judge")
    assert macro.loc["narrow", "attributes"] == 1 and macro.loc["narrow", "accuracy_miss"] == 1
    mine = result.cells[result.cells["judge"] == "mixed"]
    assert macro.loc["mixed", "accuracy_miss"] == pytest.approx(mine["accuracy_miss"].mean())


def test_a_gold_abstention_label_is_shown_but_not_scored():
    gold = pd.DataFrame([{"candidate_id": IMAGES[0], "attribute": "religion", "label": "unspecified"},
                         {"candidate_id": IMAGES[1], "attribute": "religion", "label": "Sikh"}])
    rows = [answer("j", IMAGES[0], "religion", "ok", "Hindu"), answer("j", IMAGES[1], "religion", "ok", "Sikh")]
    result = audit_attributes(data_of(rows, gold), Resampling(0))
    c = result.cells.iloc[0]
    assert c["n"] == 1 and c["accuracy_miss"] == 1
    counts = result.confusion.set_index(["gold", "predicted"])["count"]
    assert counts["unspecified", "Hindu"] == 1 and counts["Sikh", "Sikh"] == 1 and counts.sum() == 2
