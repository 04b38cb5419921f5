"""A small audit database for the app's tests: pools, votes, judges with known picks; and how
the tests open the app on a database (`open_app`; the `data_folder` fixture that lets it open
them is in tests/conftest.py).

Built on `tests.support.pools.make_pool_set` (PIL-drawn images, alignment ratings),
plus individual votes, the cultural-error outcomes, selector judges whose picks
follow a known rule, one parse failure and an optional content scorer. Prompt
p000 contains HTML and quotes, to check that the app shows it literally.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from app_ui import painted
from audit_core import store
from audit_core.ingest.pools import write_pools
from audit_core.selection import orders
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.store.records import CallRecord, RunRecord, ScoreRecord
from tests.support.paths import APP, APP_PAGES
from tests.support.pools import make_pool_set

UNEXPECTED = "unexpected error"  # the start of the app's one line for an error it did not foresee
HTML_PROMPT = '<b>Bold</b> "quoted" <script>alert(1)</script> & a festival'
FAILED = ("p001", 2)  # (prompt, order) where the first judge's output does not parse


def _literal(markdown: str) -> str:
    """Escaped Markdown as the reader sees it: each backslash escape gives its character."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _card_boxes(node: object) -> list[object]:
    """The blocks under `node` holding exactly a caption then a subheader: the cards of `app_ui.glance.cards`."""
    children = list(getattr(node, "children", {}).values())
    if [getattr(c, "type", None) for c in children] == ["caption", "subheader"]:
        return [node]
    return [box for child in children for box in _card_boxes(child)]


def cards(at: AppTest) -> list[tuple[str, str]]:
    """(label, value) of every headline card the page drew (`app_ui.glance.cards`), in order, as the reader sees them."""
    return [(_literal(caption.value), _literal(value.value)) for caption, value in
            (list(box.children.values()) for box in _card_boxes(at.main))]


def markdown_texts(at: AppTest) -> list[str]:
    """Every Markdown body of the page, then each card's label and value."""
    return [m.value for m in at.markdown] + [t for c in cards(at) for t in c]


def open_app(params: Mapping[str, str | list[str]], *, timeout: float = 120, painted_first: bool = True) -> AppTest:
    """Run the app as a link with these query parameters would open it; fail on any exception. With
    `painted_first` each page is drawn whole, as a browser has it once it has painted the first pass
    (`app_ui.painted`; AppTest runs no browser script to say so)."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(params)
    if painted_first:
        at.session_state[painted.STATE] = set(APP_PAGES)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def load_tiny(db: str | Path) -> SelectionData:
    """The audit data of dataset 'tiny' in `db`, read through a read-only connection."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return load_selection_data(con, "tiny")
    finally:
        con.close()


def pick_rule(prompt_index: int, judge_index: int, order: int, m: int) -> int:
    """Canonical index a test judge picks: orders agree on even prompts, flip on odd ones."""
    return (prompt_index + judge_index + (order if prompt_index % 2 else 0)) % m


def build_app_db(
    db: Path,
    image_dir: Path,
    *,
    n_prompts: int = 12,
    judges: Sequence[str] = ("alpha", "beta"),
    n_orders: int = 3,
    scorer: bool = True,
    images: bool = True,
    simulated: bool = True,
) -> Path:
    """Write the test dataset 'tiny' (see module docstring) into `db`; returns `db`."""
    pools = make_pool_set(image_dir, n_prompts=n_prompts, pool_sizes=(3, 4))
    pools.prompts.loc[0, "prompt"] = HTML_PROMPT
    pools.prompts["category"] = np.where(np.arange(n_prompts) % 3 == 0, "weddings", "festivals")
    if not images:
        pools.candidates["image_path"] = None
    rng = np.random.default_rng(1)
    extra, votes = [], []
    for cid, value in pools.ratings[["candidate_id", "value"]].itertuples(index=False):
        for outcome in ("stereotype", "missing_explicit", "missing_implicit", "image_quality", "overall"):
            extra.append({"candidate_id": cid, "outcome": outcome, "pool": "all", "value": float(rng.choice([0, 0.5, 1])), "n": 3})
        spread = [value, value, value] if value in (0.0, 1.0) else [0.0, 0.5, 1.0]
        votes += [{"candidate_id": cid, "outcome": "alignment", "pool": "all", "annotator": f"a{k}", "value": v}
                  for k, v in enumerate(spread)]
    pools.ratings = pd.concat([pools.ratings, pd.DataFrame(extra)], ignore_index=True)
    pools.votes = pd.DataFrame(votes)
    pools.source = "demo" if simulated else "tests"
    pools.notes = "SIMULATED test data" if simulated else None

    con = store.connect(db)
    try:
        with store.transaction(con):
            write_pools(con, pools)
            _record_judges(con, pools.candidates, judges, n_orders, scorer)
    finally:
        con.close()
    return db


def _record_judges(con, candidates: pd.DataFrame, judges: Sequence[str], n_orders: int, scorer: bool) -> None:
    pools = candidates.groupby("prompt_id")["candidate_id"].apply(sorted)
    for j, judge in enumerate(judges):
        run_id = f"tiny:{judge}"
        store.insert_records(con, "runs", [RunRecord(run_id, "tiny", judge, "selector", "simulated", "done")])
        calls = []
        for i, (pid, ids) in enumerate(pools.items()):
            for k in range(n_orders):
                shown = orders.rotate(ids, k)
                chosen = ids[pick_rule(i, j, k, len(ids))]
                label = orders.slot_labels(len(ids))[shown.index(chosen)]
                failed = j == 0 and (pid, k) == FAILED
                calls.append(
                    CallRecord(
                        run_id=run_id, prompt_id=pid, order_index=k, slot_candidate_ids=shown,
                        status="parse_fail" if failed else "ok",
                        request_key=f"{run_id}:{pid}:{k}",
                        choice_label=None if failed else label,
                        chosen_candidate_id=None if failed else chosen,
                        raw_output="I like the <i>second</i> one best" if failed else f'{{"choice": "{label}"}}',
                        parse_note="prose, no JSON" if failed else None,
                    )
                )
        store.insert_records(con, "calls", calls)
    if scorer:
        store.insert_records(con, "runs", [RunRecord("tiny:scorer", "tiny", "scorer", "scorer", "simulated", "done")])
        store.insert_records(
            con, "scores",
            [ScoreRecord("tiny:scorer", cid, float(len(cid) % 5) / 5) for cid in candidates["candidate_id"]],
        )
