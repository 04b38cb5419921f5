"""The rating demo: shape, determinism, every call recorded, and the findings it exists to show."""

import json

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from audit_core import Resampling, store
from audit_core.rating.alignment import alignment_tables, tilt_table
from audit_core.rating.reliability import pool_agreement_table, reliability_table
from runners import analyze, demo
from runners.backends.simulated import simulated_scorer
from runners.demo import ratings as demo_ratings
from runners.rating.protocol import DEFAULT_CONDITIONS, load_conditions
from runners.recording.scorer import record_scorer
from tests.support.paths import APP

N_PROMPTS = 60  # half the default: 120 items, 40 prompts per category
SEED = 0
RESAMPLES = 400


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    paths = []
    for name in ("a", "b"):
        db = tmp_path_factory.mktemp(name) / "demo.duckdb"
        demo_ratings.build_rating_demo(db, n_prompts=N_PROMPTS, seed=SEED, progress=False)
        paths.append(db)
    return paths


@pytest.fixture(scope="module")
def recorded(built):
    """What the audit reads: rating calls, votes, consensus rows, items with their breakdown columns."""
    con = store.connect(built[0], read_only=True)
    try:
        ds = demo_ratings.DATASET
        calls = store.load_rating_calls(con, ds)
        votes = store.load_votes(con, ds)
        ratings = con.execute("SELECT candidate_id, outcome, pool, value, n FROM ratings WHERE dataset_id = ?",
                              [ds]).df()
        culture = store.load_candidate_attributes(con, ds).pivot(index="candidate_id", columns="attribute",
                                                                 values="value")
        candidates = store.load_candidates(con, ds).merge(store.load_prompts(con, ds), on="prompt_id")
        runs = store.load_runs(con, ds)
        row = store.dataset_row(con, ds)
    finally:
        con.close()
    items = candidates[["candidate_id", "category"]].merge(culture.reset_index(), on="candidate_id")
    return {"calls": calls, "votes": votes, "ratings": ratings, "items": items, "candidates": candidates,
            "runs": runs, "row": row}


@pytest.fixture(scope="module")
def tables(recorded):
    return alignment_tables(recorded["calls"], votes=recorded["votes"], items=recorded["items"],
                            resampling=Resampling(RESAMPLES, 0))


def _content(db):
    con = store.connect(db, read_only=True)
    try:
        params = [demo_ratings.DATASET]
        queries = {
            "prompts": "SELECT * EXCLUDE (dataset_id) FROM prompts WHERE dataset_id = ? ORDER BY ALL",
            "candidates": "SELECT * EXCLUDE (dataset_id, image_path) FROM candidates WHERE dataset_id = ? ORDER BY ALL",
            "ratings": "SELECT * EXCLUDE (dataset_id) FROM ratings WHERE dataset_id = ? ORDER BY ALL",
            "votes": "SELECT * EXCLUDE (dataset_id) FROM votes WHERE dataset_id = ? ORDER BY ALL",
            "attributes": "SELECT * EXCLUDE (dataset_id) FROM candidate_attributes WHERE dataset_id = ? ORDER BY ALL",
            "rating_calls": """SELECT r.judge, c.condition, c.candidate_id, c.rating, c.status, c.raw_output,
                                      c.request_key, c.input_json
                               FROM rating_calls c JOIN runs r USING (run_id) WHERE r.dataset_id = ? ORDER BY ALL""",
            "scores": """SELECT r.judge, s.candidate_id, s.score FROM scores s JOIN runs r USING (run_id)
                         WHERE r.dataset_id = ? ORDER BY ALL""",
        }
        return {name: con.execute(sql, params).df() for name, sql in queries.items()}
    finally:
        con.close()


def _row(frame, **where):
    mask = np.ones(len(frame), dtype=bool)
    for column, value in where.items():
        mask &= (frame[column] == value).to_numpy()
    assert mask.sum() == 1, where
    return frame[mask].iloc[0]


def test_same_seed_gives_same_content_and_images(built):
    first, second = (_content(db) for db in built)
    for table in first:
        assert not first[table].empty, table
        assert first[table].equals(second[table]), table
    images = [sorted((db.parent / "demo_images" / demo_ratings.DATASET).glob("*.png")) for db in built]
    assert len(images[0]) == 2 * N_PROMPTS
    assert [p.read_bytes() for p in images[0][:10]] == [p.read_bytes() for p in images[1][:10]]


def test_pools_are_shaped_like_a_cross_cultural_rating_study(recorded):
    row, candidates, votes, ratings = recorded["row"], recorded["candidates"], recorded["votes"], recorded["ratings"]
    assert row["source"] == "demo" and "SIMULATED" in row["notes"]
    assert candidates["prompt_id"].nunique() == N_PROMPTS and candidates["category"].nunique() == 3
    # Each prompt: one image per culture.
    cultures = recorded["items"].merge(candidates[["candidate_id", "prompt_id"]]).groupby("prompt_id")["culture"]
    assert (cultures.agg(lambda c: tuple(sorted(c))) == ("A", "B")).all()
    # Five annotators per pool vote on every image, on the rubric's points.
    assert set(votes["outcome"]) == {"rubric"} and set(votes["pool"]) == {"a", "b"}
    per_item = votes.groupby(["candidate_id", "pool"])["annotator"].nunique()
    assert len(per_item) == 2 * len(candidates) and (per_item == 5).all()
    assert set(votes["value"]) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    # Consensus rows: the mean of the pool's votes (rubric), rescaled to [0, 1] (alignment; `all` over both pools).
    mean = votes.groupby(["candidate_id", "pool"])["value"].mean()
    rubric = ratings[ratings["outcome"] == "rubric"].set_index(["candidate_id", "pool"])
    assert (rubric["n"] == 5).all() and np.allclose(rubric["value"], mean.loc[rubric.index])
    aligned = ratings[ratings["outcome"] == "alignment"].set_index(["candidate_id", "pool"]).sort_index()
    assert set(aligned.index.get_level_values("pool")) == {"all", "a", "b"}
    assert np.allclose(aligned["value"].xs("a", level="pool"), (mean.xs("a", level="pool") - 1) / 4)
    everyone = votes.groupby("candidate_id")["value"].mean()
    assert np.allclose(aligned["value"].xs("all", level="pool"), (everyone - 1) / 4)
    assert (aligned["n"].xs("all", level="pool") == 10).all()


def test_every_rater_call_is_recorded_under_every_condition(recorded):
    calls, runs = recorded["calls"], recorded["runs"]
    n_items = 2 * N_PROMPTS
    expected = {(judge, c) for judge, _, conditions in demo_ratings.DEMO_RATERS for c in conditions}
    counts = calls.groupby(["judge", "condition"]).size()
    assert set(counts.index) == expected and (counts == n_items).all()
    assert calls["request_key"].is_unique and calls["raw_output"].map(lambda t: isinstance(t, str)).all()
    assert set(runs["kind"]) == {"rater", "scorer"} and set(runs["backend"]) == {"simulated"}
    assert set(runs.loc[runs["kind"] == "scorer", "judge"]) == {demo_ratings.DEMO_SCORER[0]}
    assert set(runs["status"]) == {"finished"}
    assert "demos_a" in load_conditions(DEFAULT_CONDITIONS)
    ok = calls["status"] == "ok"
    assert calls.loc[ok, "rating"].between(1, 5).all() and calls.loc[~ok, "rating"].isna().all()


def test_demonstrations_show_pool_a_and_never_the_rated_item(built):
    con = store.connect(built[0], read_only=True)
    try:
        shown = con.execute(
            """SELECT c.candidate_id, c.input_json FROM rating_calls c JOIN runs r USING (run_id)
               WHERE r.dataset_id = ? AND c.condition = 'demos_a'""", [demo_ratings.DATASET]).df()
    finally:
        con.close()
    for cid, text in shown.itertuples(index=False):
        demos = json.loads(text)["demonstrations"]
        assert len(demos) == 3 and cid not in demos


def test_each_pool_is_reliable_and_the_pools_split_on_contested_items(recorded):
    reliability = reliability_table(recorded["votes"]).set_index("pool")
    assert set(reliability.index) == {"a", "b"}
    assert (reliability[["alpha_ordinal", "alpha_interval"]] >= 0.7).all().all()
    consensus = recorded["ratings"].query("outcome == 'rubric'")
    wide = consensus.pivot(index="candidate_id", columns="pool", values="value")
    high, low = (wide >= 4).all(axis=1), (wide <= 2).all(axis=1)
    contested = wide.index[~high & ~low]
    assert 0.3 < len(contested) / len(wide) < 0.7
    on_contested = pool_agreement_table(consensus=consensus[consensus["candidate_id"].isin(contested)])
    overall = pool_agreement_table(consensus=consensus)
    assert on_contested["pearson"].iloc[0] < 0.1 < overall["pearson"].iloc[0]
    assert on_contested["mean_abs_diff"].iloc[0] > 1.0
    anchors = wide[high | low]
    assert (anchors["a"] - anchors["b"]).abs().mean() < 0.5
    # On contested items each pool rates its own culture's image higher.
    culture = recorded["items"].set_index("candidate_id")["culture"].loc[contested]
    lean = (wide.loc[contested, "a"] - wide.loc[contested, "b"]).groupby(culture).mean()
    assert lean["A"] > 1.0 and lean["B"] < -1.0


def test_floor_rater_almost_never_uses_the_bottom_points_the_pools_do(tables):
    for pool in ("a", "b"):
        row = _row(tables.alignment, judge="floor-rater", condition="default", pool=pool, group="all")
        assert row["n"] == 2 * N_PROMPTS and row["abstained"] == 0
        assert row["floor_share"] <= 0.05 and row["pool_floor_share"] >= 0.25
        assert row["floor_recovery"] <= 0.1
        assert row["mae"] > _row(tables.alignment, judge="tilted-rater", condition="default",
                                 pool="a", group="all")["mae"]
    # It follows both pools evenly: no lean where they disagree.
    contested = _row(tables.tilt, judge="floor-rater", condition="default", pool_a="a", pool_b="b",
                     group="anchor=contested")
    assert abs(contested["tilt"]) < 0.2


def test_tilted_rater_leans_to_pool_a_persona_moves_it_part_way_demonstrations_deepen_it(tables, recorded):
    def tilt(condition, group):
        return _row(tables.tilt, judge="tilted-rater", condition=condition, pool_a="a", pool_b="b", group=group)

    default, persona = tilt("default", "all"), tilt("insider_persona", "all")
    assert default["tilt_lo"] > 0 and default["delta_hi"] < 0  # clearly toward a: MAE_a < MAE_b
    assert persona["tilt"] < default["tilt"]
    # Where the pools disagree by whole points, T is sharpest (on anchors their small differences make T_i ±1).
    default, persona = tilt("default", "anchor=contested"), tilt("insider_persona", "anchor=contested")
    assert default["tilt"] > 0.4 and persona["tilt_hi"] < default["tilt_lo"]
    assert -1 < persona["tilt"] < default["tilt"] - 0.4  # part of the way: not all the way to b
    # Demonstrations with pool a's consensus: compared on the items rated ok under all three conditions
    # (the scripted prose answers fail on different items under each).
    calls = recorded["calls"][recorded["calls"]["judge"] == "tilted-rater"]
    rated = calls[calls["status"] == "ok"].groupby("candidate_id")["condition"].nunique()
    both = calls[calls["candidate_id"].isin(rated.index[rated == 3])]
    paired = tilt_table(both, votes=recorded["votes"], resampling=Resampling(0), group_by=[]).set_index("condition")["tilt"]
    assert paired["demos_a"] > paired["default"] + 0.02 > paired["insider_persona"]


def test_unsure_rater_abstains_on_a_visible_share_where_the_pools_disagree(tables):
    row = _row(tables.alignment, judge="unsure-rater", condition="default", pool="a", group="all")
    assert 0.2 <= row["abstained"] / (row["n"] + row["abstained"]) <= 0.6
    contested = _row(tables.alignment, judge="unsure-rater", condition="default", pool="a", group="anchor=contested")
    high = _row(tables.alignment, judge="unsure-rater", condition="default", pool="a", group="anchor=high")
    assert contested["abstained"] > contested["n"] and high["abstained"] == 0


def test_breakdowns_cover_culture_and_category(tables):
    groups = set(tables.alignment["group"])
    assert {"culture=A", "culture=B", "category=food", "category=dress", "category=celebrations"} <= groups


def test_the_content_scorer_is_recorded_and_set_beside_the_rubric(built, recorded, tmp_path):
    """The SIMULATED scorer went through the scorer recording path (a rerun finds every image scored), and analyze
    writes each rating judge's rescaled rubric beside it: the scorer reads the images' shared quality, which both
    pools' ratings follow, so every judge's rubric correlates with it."""
    scorer, profile = demo_ratings.DEMO_SCORER
    con = store.connect(built[1])
    try:
        again = record_scorer(con, dataset=demo_ratings.DATASET, scorer=scorer, backend=simulated_scorer(profile),
                              backend_name="simulated", model=profile, progress=False)
    finally:
        con.close()
    assert again.recorded == 0 and again.skipped == 2 * N_PROMPTS
    out = tmp_path / "out"
    assert analyze.main(["--db", str(built[0]), "--dataset", demo_ratings.DATASET, "--out", str(out),
                         "--resamples", "100"]) == 0
    table = pd.read_csv(out / "rubric_vs_scorer.csv")
    calls = recorded["calls"]
    ok = calls[calls["status"] == "ok"].groupby(["judge", "condition"]).size()
    assert list(zip(table["judge"], table["condition"])) == list(ok.index) and set(table["scorer"]) == {scorer}
    assert (table["n"].to_numpy() == ok.to_numpy()).all() and (table["n"] + table["unrated"] == 2 * N_PROMPTS).all()
    assert (table["pearson_lo"] > 0.5).all() and (table["spearman_lo"] > 0.5).all()
    items = pd.read_csv(out / "rubric_vs_scorer_items.csv")
    assert np.allclose(items["rubric_scaled"], (items["rating"] - 3) / 2) and items["score"].notna().all()


def test_the_alignment_page_sets_the_rubric_beside_the_scorer(built, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path_factory.getbasetemp()))
    monkeypatch.delenv("JUDGE_AUDIT_DB", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"db": str(built[0].relative_to(tmp_path_factory.getbasetemp())), "page": "alignment",
                            "resamples": "1000", "rater": "unsure-rater"})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "The rubric beside content scorers" in [h.value for h in at.subheader]
    table = next(d.value for d in at.dataframe if "Spearman ρ" in d.value.columns)
    assert len(table) == sum(len(conditions) for _, _, conditions in demo_ratings.DEMO_RATERS)
    unsure = table[table["judge"] == "unsure-rater"].iloc[0]
    assert unsure["scorer"] == demo_ratings.DEMO_SCORER[0] and int(unsure["unrated"]) > 0
    scatter = at.get("plotly_chart")[-1].proto.spec
    assert "unsure-rater" in scatter and "rubric rescaled" in scatter


def test_is_built_covers_the_rating_demo(built, tmp_path):
    db = built[0]
    assert demo_ratings.is_built(db, SEED, N_PROMPTS)
    assert not demo_ratings.is_built(db, SEED + 1, N_PROMPTS)
    assert not demo_ratings.is_built(db, SEED, N_PROMPTS + 1)
    assert not demo_ratings.is_built(tmp_path / "absent.duckdb", SEED, N_PROMPTS)


def test_demo_command_builds_both_datasets_and_rebuilds_an_incomplete_rating_demo(tmp_path, capsys):
    db = tmp_path / "demo.duckdb"
    args = ["--db", str(db), "--prompts", "5", "--rating-prompts", "6", "--attribute-prompts", "2", "--seed", "1",
            "--quiet"]
    assert demo.main(args) == 0
    con = store.connect(db, read_only=True)
    datasets = set(store.list_datasets(con)["dataset_id"])
    con.close()
    assert {demo.DATASET, demo_ratings.DATASET} <= datasets
    assert demo.main(args) == 0 and "already built" in capsys.readouterr().out
    con = store.connect(db)
    with store.transaction(con):
        store.delete_judge(con, demo_ratings.DATASET, "unsure-rater")
    con.close()
    assert not demo_ratings.is_built(db, 1, 6)
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    assert demo_ratings.DATASET in out and "3 judges" not in out  # only the incomplete dataset is rebuilt
    assert demo_ratings.is_built(db, 1, 6) and demo.is_built(db, 1, 5)
    con = store.connect(db)
    with store.transaction(con):
        store.delete_judge(con, demo_ratings.DATASET, demo_ratings.DEMO_SCORER[0])
    con.close()
    assert not demo_ratings.is_built(db, 1, 6)  # a missing scorer makes the rating demo incomplete too
