"""A rating dataset built through the real ingest and rating paths, for the rating audit's tests and the app's.

`build_rating_db` writes dataset 'rate': 24 items, two annotator pools (a: three identical
integer votes per item; b: agrees with a on two items in three, mirrors it elsewhere, with one
annotator off by one on odd items), a culture attribute, and four rating judges recorded by
`record_rater`: `copy` (pool a's consensus exactly), `constant` (always 3, except one raw output
of HTML and script that fails to parse), `unsure` (abstains where the pools disagree; two
conditions) and `tilted`. `write_runs_on_two_scales` adds a votes-only dataset with two imported
rating runs on different recording scales.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

from audit_core import store
from audit_core.ingest.pools import write_dataset
from audit_core.store.records import RatingCallRecord, RunRecord
from runners.backends.simulated_rater import simulated_rater
from runners.rating.recorder import pool_consensus, record_rater
from tests.support.pools import make_pool_set

DATASET = "rate"
HTML_OUTPUT = '<script>alert("x")</script> <b>4</b> & more'
HTML_ITEM = "p003_flux"  # the item whose `constant` output is HTML


class ConstantRater:
    """Answers 3 to everything, except an HTML-and-script text for one item."""

    def generate(self, request) -> str:
        return HTML_OUTPUT if request.candidate_id == HTML_ITEM else "3"

    def model_revision(self) -> str:
        return "constant-test"


def rating_votes(candidate_ids: list[str]) -> pd.DataFrame:
    """Pool a: three identical integer votes; pool b: a's value, or 6 − it on every third item,
    with its third annotator one point up (clipped) on odd items."""
    rows = []
    for i, cid in enumerate(candidate_ids):
        a = 1 + i % 5
        b = 6 - a if i % 3 == 0 else a
        rows += [(cid, "rubric", "a", f"a{k}", float(a)) for k in range(3)]
        rows += [(cid, "rubric", "b", f"b{k}", float(min(5, b + (k == 2 and i % 2)))) for k in range(3)]
    return pd.DataFrame(rows, columns=["candidate_id", "outcome", "pool", "annotator", "value"])


def build_rating_db(db: Path, image_dir: Path, *, n_prompts: int = 12) -> Path:
    """Write dataset 'rate' (see the module docstring) into `db` and record its rating judges; returns `db`."""
    pools = make_pool_set(image_dir, dataset=DATASET, n_prompts=n_prompts, pool_sizes=(2,))
    ids = list(pools.candidates["candidate_id"])
    pools = replace(
        pools, source="demo", notes="SIMULATED test ratings",
        votes=rating_votes(ids),
        attributes=pd.DataFrame({"candidate_id": ids, "attribute": "culture",
                                 "value": ["east" if i % 2 else "west" for i in range(len(ids))]}),
    )
    write_dataset(db, pools)
    con = store.connect(db)
    try:
        consensus = pool_consensus(con, DATASET, "rubric")
        copier = replace(simulated_rater("tilted", consensus), pool_weights={"a": 1.0}, noise=0.0, prose_rate=0.0)
        judges = [("copy", copier, ["default"]), ("constant", ConstantRater(), ["default"]),
                  ("unsure", simulated_rater("unsure", consensus), ["default", "insider_persona"]),
                  ("tilted", simulated_rater("tilted", consensus), ["default", "insider_persona"])]
        for judge, backend, conditions in judges:
            record_rater(con, dataset=DATASET, judge=judge, backend=backend, backend_name="simulated",
                         model=judge, conditions=conditions, progress=False)
    finally:
        con.close()
    return db


def write_runs_on_two_scales(db: Path, image_dir: Path) -> str:
    """A votes-only dataset 'scales' with two rating runs on the rubric recording scales 1-5 and 0-10; its id."""
    pools = make_pool_set(image_dir, dataset="scales", n_prompts=2, pool_sizes=(2,))
    ids = list(pools.candidates["candidate_id"])
    write_dataset(db, replace(pools, votes=rating_votes(ids)))
    con = store.connect(db)
    try:
        for judge, scale in (("five", [1, 5]), ("ten", [0, 10])):
            run_id = f"scales:{judge}"
            store.insert_records(con, "runs", [RunRecord(run_id, "scales", judge, "rater", "import", "imported",
                                                         config_json=json.dumps({"outcome": "rubric", "scale": scale}))])
            store.insert_records(con, "rating_calls", [RatingCallRecord(run_id, cid, "default", "ok", f"{run_id}:{cid}",
                                                                        rating=3.0) for cid in ids])
    finally:
        con.close()
    return "scales"
