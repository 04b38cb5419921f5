"""Single-image prompts: an attribute or rating dataset without selector decisions needs one image per prompt,
not a pool of two; with selector decisions or alignment ratings (a selection audit), or when a selector judge is
run on it, the rule stands and is said."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from PIL import Image

from audit_core import store
from runners import analyze, ingest, run_judge, run_labeler
from tests.support.snapshots import snapshot
from tests.support.tables import write_table

IMAGES = {"p1": ["p1_a"], "p2": ["p2_a"], "p3": ["p3_a", "p3_b"]}  # two single-image prompts and one pool


def write_study(tmp: Path) -> list[str]:
    """Pools with images, gold gender labels, one judge's recorded answers: the ingest's arguments."""
    (tmp / "images").mkdir()
    pools, gold, answers = [], [], []
    for pid, ids in IMAGES.items():
        for k, cid in enumerate(ids):
            Image.new("RGB", (16, 16), (40 * k, 90, 160)).save(tmp / "images" / f"{cid}.png")
            pools.append({"prompt_id": pid, "prompt": f"A portrait ({pid})", "candidate_id": cid,
                          "image_path": f"images/{cid}.png"})
            gender = "female" if k else "male"
            gold.append({"candidate_id": cid, "attribute": "gender", "label": gender})
            answers.append({"candidate_id": cid, "attribute": "gender", "label": gender, "rationale": "hair"})
    return ["--pools", str(write_table(tmp / "pools.csv", pools)), "--labels", str(write_table(tmp / "gold.csv", gold)),
            "--labeler", f"judge={write_table(tmp / 'judge.csv', answers)}"]


def test_an_attribute_dataset_of_single_images_is_ingested_audited_and_labelled(tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    assert ingest.main(["table", *write_study(tmp_path), "--db", str(db), "--dataset", "people"]) == 0
    assert analyze.main(["--db", str(db), "--dataset", "people", "--out", str(tmp_path / "out"),
                         "--resamples", "20"]) == 0
    cells = pd.read_csv(tmp_path / "out" / "attributes.csv").set_index("attribute")
    assert cells.loc["gender", "n"] == 4 and cells.loc["gender", "accuracy_miss"] == 1.0
    assert run_labeler.main(["--db", str(db), "--dataset", "people", "--judge", "careful", "--backend", "simulated",
                             "--model", "careful", "--quiet"]) == 0
    con = store.connect(db, read_only=True)
    try:
        calls = con.execute("SELECT count(*) FROM label_calls JOIN runs USING (run_id) WHERE judge = 'careful'")
        assert calls.fetchone()[0] == 4  # every image, the single ones included
    finally:
        con.close()
    capsys.readouterr()
    # A selector judge has nothing to choose among on p1 and p2: refused, saying so, before any call.
    before = snapshot(db)
    assert run_judge.main(["--db", str(db), "--dataset", "people", "--judge", "picker", "--backend", "simulated",
                           "--model", "strong", "--orders", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "prompt 'p1' has one candidate (2 such prompts)" in err and "selector judge needs at least 2" in err
    assert "Traceback" not in err and snapshot(db) == before


def test_with_selector_decisions_every_prompt_still_needs_a_pool(tmp_path, capsys):
    calls = write_table(tmp_path / "calls.csv", [
        {"prompt_id": "p3", "order_index": 0, "slot_candidate_ids": ["p3_a", "p3_b"], "chosen_candidate_id": "p3_a",
         "choice_label": "A", "status": "ok"}])
    db = tmp_path / "store.duckdb"
    argv = ["table", *write_study(tmp_path), "--decisions", f"picker={calls}", "--db", str(db), "--dataset", "people"]
    assert ingest.main(argv) == 2
    err = capsys.readouterr().err
    assert "pools.csv" in err and "'candidates'" in err and "prompt 'p1' has 1 candidate(s)" in err
    assert "a pool needs at least 2 where a selection audit applies (this dataset has selector decisions;" in err
    assert "Traceback" not in err and not db.exists()  # validated before the database was opened


def test_with_alignment_ratings_every_prompt_still_needs_a_pool(tmp_path, capsys):
    args = write_study(tmp_path)
    pools = pd.read_csv(args[1]).assign(alignment=0.5)
    pools.to_csv(args[1], index=False)
    db = tmp_path / "store.duckdb"
    assert ingest.main(["table", *args, "--db", str(db), "--dataset", "people"]) == 2
    err = capsys.readouterr().err
    assert "prompt 'p1' has 1 candidate(s)" in err and "alignment ratings, the selection audit's utility" in err
    assert not db.exists()
