"""The built-in demo: shape, determinism and the behaviours it exists to show."""

import numpy as np
import pytest

from audit_core import store
from audit_core.selection.data import load_selection_data
from runners import demo

N_PROMPTS = 50  # one prompt per (country, category) cell


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    paths = []
    for name in ("a", "b"):
        db = tmp_path_factory.mktemp(name) / "demo.duckdb"
        assert demo.main(["--db", str(db), "--prompts", str(N_PROMPTS), "--seed", "3", "--quiet"]) == 0
        paths.append(db)
    return paths


def _content(db):
    con = store.connect(db, read_only=True)
    try:
        tables = {
            table: con.execute(f"SELECT * EXCLUDE (dataset_id) FROM {table} ORDER BY ALL").df()
            for table in ("prompts", "ratings", "votes")
        }
        tables["candidates"] = con.execute(
            "SELECT * EXCLUDE (dataset_id, image_path) FROM candidates ORDER BY ALL"
        ).df()
        tables["calls"] = con.execute(
            """SELECT r.judge, c.prompt_id, c.order_index, c.slot_candidate_ids, c.status,
                      c.choice_label, c.chosen_candidate_id, c.raw_output, c.request_key
               FROM calls c JOIN runs r USING (run_id) ORDER BY ALL"""
        ).df()
        tables["scores"] = con.execute(
            "SELECT r.judge, s.candidate_id, s.score FROM scores s JOIN runs r USING (run_id) ORDER BY ALL"
        ).df()
    finally:
        con.close()
    return tables


def test_same_seed_gives_same_database_content(built):
    first, second = (_content(db) for db in built)
    for table in first:
        assert not first[table].empty, table
        assert first[table].equals(second[table]), table


def test_images_are_the_same_bytes(built):
    names = sorted(p.name for p in (built[0].parent / "demo_images").glob("*.png"))
    assert len(names) >= 3 * N_PROMPTS
    for name in names[:20]:
        assert (built[0].parent / "demo_images" / name).read_bytes() == (built[1].parent / "demo_images" / name).read_bytes()


def test_pools_are_shaped_like_culturalframes(built):
    con = store.connect(built[0], read_only=True)
    prompts = store.load_prompts(con, "demo")
    cands = store.load_candidates(con, "demo")
    votes = store.load_votes(con, "demo")
    row = store.dataset_row(con, "demo")
    con.close()
    assert prompts["country"].nunique() == 10 and prompts["category"].nunique() == 5
    assert set(cands.groupby("prompt_id").size()) <= {3, 4}
    assert cands["source_model"].nunique() == 4
    per_image = votes[votes["outcome"] == "alignment"].groupby("candidate_id").size()
    assert per_image.between(2, 4).all()
    assert set(votes.loc[votes["outcome"] == "alignment", "value"]) <= {0.0, 0.5, 1.0}
    assert "SIMULATED" in row["notes"] and row["source"] == "demo"


def test_simulated_judges_show_the_behaviours_worth_auditing(built):
    con = store.connect(built[0], read_only=True)
    data = load_selection_data(con, "demo")
    con.close()
    assert data.judges == ["slot-a-judge", "strong-judge", "weak-judge"]
    assert data.scorers == ["content-scorer"]

    def slot_share(judge, slot):
        slots = data.slots[judge]
        return float((slots[slots >= 0] == slot).mean())

    assert slot_share("slot-a-judge", 0) > 0.5
    assert slot_share("weak-judge", 1) > 0.4
    assert abs(slot_share("strong-judge", 0) - np.mean(1 / data.pool_sizes)) < 0.15
    statuses = set(data.statuses["weak-judge"].ravel())
    assert {"ok", "recovered", "parse_fail"} <= statuses
    assert set(data.statuses["strong-judge"].ravel()) == {"ok"}

    h = data.utility
    rows = np.arange(data.n_prompts)
    mean_h = np.nanmean(h, axis=1)

    def gain(picks):
        ok = picks >= 0
        return float(np.mean(h[rows[ok], picks[ok]] - mean_h[ok]))

    assert gain(data.picks["strong-judge"][:, 0]) > gain(data.picks["slot-a-judge"][:, 0])
    assert gain(np.nanargmax(data.scores["content-scorer"], axis=1)) > 0


def test_second_run_with_same_seed_is_a_no_op(built, capsys):
    assert demo.main(["--db", str(built[0]), "--prompts", str(N_PROMPTS), "--seed", "3", "--quiet"]) == 0
    assert "already built" in capsys.readouterr().out
