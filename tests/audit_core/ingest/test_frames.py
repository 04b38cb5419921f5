"""The Python API on DataFrames (`audit_core.store_from_frames`) against the command-line path.

A dataset is exported from a store as table-contract frames; the same frames are then
audited twice: written to files and ingested by `runners.ingest table`, and passed to
`store_from_frames`. Both stores must give the same selection audit, table for table, on
the simulated demo and on the JudgeActs main split. Bad frames get the command's messages,
naming the frame instead of a file.
"""

from __future__ import annotations

from pathlib import Path

import hypothesis.strategies as st
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

from audit_core import InputError, Resampling, audit_selection, load_selection_data, store, store_from_frames
from runners import ingest
from runners.demo import build_demo
from tests.support.judgeacts import ingest_main_split
from tests.support.paths import JUDGEACTS_MAIN

RESAMPLES = 200
OUTCOMES = ("alignment", "stereotype", "missing_explicit", "missing_implicit", "image_quality", "overall")
DECISION_COLUMNS = ["prompt_id", "order_index", "slot_candidate_ids", "status", "choice_label", "chosen_candidate_id",
                    "ranking", "raw_output", "parse_note", "attempts", "seconds"]


def exported_frames(con, dataset: str) -> dict:
    """The dataset in `con` as table-contract frames: pools (one row per candidate and pool), votes,
    and per selector judge its decisions, per scorer its scores."""
    prompts = store.load_prompts(con, dataset)
    candidates = store.load_candidates(con, dataset)
    ratings = con.execute("SELECT candidate_id, outcome, pool, value, n FROM ratings WHERE dataset_id = ?",
                          [dataset]).df()
    wide = ratings.pivot_table(index=["candidate_id", "pool"], columns="outcome", values="value").reset_index()
    counts = ratings[ratings["outcome"] == "alignment"][["candidate_id", "pool", "n"]]
    pools = (candidates[["prompt_id", "candidate_id", "source_model"]]
             .merge(prompts[["prompt_id", "prompt", "country", "category", "split"]], on="prompt_id")
             .merge(wide, on="candidate_id").merge(counts, on=["candidate_id", "pool"], how="left"))
    pools = pools[[c for c in ["prompt_id", "prompt", "country", "category", "split", "candidate_id", "source_model",
                               "pool", "n", *OUTCOMES] if c in pools]]
    votes = store.load_votes(con, dataset)[["candidate_id", "outcome", "pool", "annotator", "value"]]
    calls = store.load_calls(con, dataset)
    decisions = {judge: frame[DECISION_COLUMNS].assign(slot_candidate_ids=frame["slot_candidate_ids"].map(list))
                 .reset_index(drop=True) for judge, frame in calls.groupby("judge")}
    scored = store.load_scores(con, dataset)
    scores = {scorer: frame[["candidate_id", "score"]].reset_index(drop=True) for scorer, frame in scored.groupby("scorer")}
    return {"pools": pools, "votes": votes, "decisions": decisions, "scores": scores}


def ingested_by_the_command(frames: dict, folder: Path, dataset: str) -> Path:
    """The frames written as Parquet files and ingested with `runners.ingest table`; the database."""
    folder.mkdir()
    files = {}
    for role in ("pools", "votes"):
        files[role] = folder / f"{role}.parquet"
        frames[role].to_parquet(files[role], index=False)
    argv = ["table", "--pools", str(files["pools"]), "--votes", str(files["votes"])]
    for flag, key in (("--decisions", "decisions"), ("--scores", "scores")):
        for name, frame in frames[key].items():
            path = folder / f"{key}-{len(argv)}.parquet"
            frame.to_parquet(path, index=False)
            argv += [flag, f"{name}={path}"]
    db = folder / "cli.duckdb"
    assert ingest.main([*argv, "--db", str(db), "--dataset", dataset]) == 0
    return db


def assert_same_audit(frames: dict, tmp_path: Path, dataset: str) -> None:
    db = ingested_by_the_command(frames, tmp_path / "files", dataset)
    con = store.connect(db, read_only=True)
    try:
        by_command = audit_selection(load_selection_data(con, dataset), Resampling(RESAMPLES, 3),
                                     calls=store.load_calls(con, dataset))
    finally:
        con.close()
    memory = store_from_frames(frames["pools"], dataset=dataset, votes=frames["votes"], decisions=frames["decisions"],
                               scores=frames["scores"])
    by_api = audit_selection(load_selection_data(memory, dataset), Resampling(RESAMPLES, 3),
                             calls=store.load_calls(memory, dataset))
    memory.close()
    tables, expected = by_api.tables(), by_command.tables()
    assert sorted(tables) == sorted(expected)
    for name, table in expected.items():
        pd.testing.assert_frame_equal(tables[name], table, obj=name)
    assert by_api.to_summary() == by_command.to_summary()


def test_frames_audit_as_the_command_line_does_on_the_demo(tmp_path):
    db = tmp_path / "demo.duckdb"
    build_demo(db, n_prompts=60, progress=False)
    con = store.connect(db, read_only=True)
    frames = exported_frames(con, "demo")
    con.close()
    assert len(frames["decisions"]) == 3 and frames["scores"]
    assert_same_audit(frames, tmp_path, "demo")


@pytest.mark.skipif(not JUDGEACTS_MAIN.is_dir(), reason=f"{JUDGEACTS_MAIN} is not available")
def test_frames_audit_as_the_command_line_does_on_the_judgeacts_main_split(tmp_path):
    db = tmp_path / "ja.duckdb"
    ingest_main_split(db)
    con = store.connect(db, read_only=True)
    frames = exported_frames(con, "main")
    con.close()
    assert sorted(frames["decisions"]) == ["qwen", "smol"] and list(frames["scores"]) == ["clip"]
    assert_same_audit(frames, tmp_path, "main")


POOLS = pd.DataFrame({"prompt_id": ["p1"] * 3 + ["p2"] * 3, "prompt": ["a market"] * 3 + ["a wedding"] * 3,
                      "candidate_id": ["p1_a", "p1_b", "p1_c", "p2_a", "p2_b", "p2_c"],
                      "alignment": [1.0, 0.0, 0.5, 0.0, 0.5, 1.0]})
DECISIONS = pd.DataFrame({"prompt_id": ["p1", "p2"], "order_index": [0, 0],
                          "slot_candidate_ids": [["p1_a", "p1_b", "p1_c"], ["p2_a", "p2_b", "p2_c"]],
                          "chosen_candidate_id": ["p1_a", "p2_b"]})
CELLS = {"alignment": st.sampled_from([7.0, -1.0, 0.25, float("inf")]),
         "candidate_id": st.sampled_from(["", "   ", "\u200b", "p1_a"]),
         "prompt_id": st.sampled_from(["", "\t", "p2"])}


def command_outcome(frame: pd.DataFrame, folder: Path, capsys) -> tuple[int, str]:
    """`runners.ingest table`'s exit status and first stderr line for `frame` and DECISIONS as Parquet
    files, with the pools file's path told as "pools frame"."""
    pools, decisions = folder / "pools.parquet", folder / "decisions.parquet"
    frame.to_parquet(pools, index=False)
    DECISIONS.to_parquet(decisions, index=False)
    capsys.readouterr()
    code = ingest.main(["table", "--pools", str(pools), "--decisions", f"j={decisions}", "--db",
                        str(folder / "cli.duckdb"), "--dataset", "d"])
    first = (capsys.readouterr().err.splitlines() or [""])[0]
    return code, first.replace(str(pools), "pools frame")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(sorted(CELLS)), row=st.integers(0, 5), data=st.data())
def test_a_bad_frame_gets_the_commands_message_naming_the_frame(tmp_path_factory, capsys, column, row, data):
    bad = POOLS.copy()
    bad.loc[row, column] = data.draw(CELLS[column])
    code, line = command_outcome(bad, tmp_path_factory.mktemp("cli"), capsys)
    try:
        store_from_frames(bad, dataset="d", decisions={"j": DECISIONS})
    except InputError as err:
        assert (code, line) == (2, f"error: {err}")
        assert err.file == "pools frame"
    else:  # what the contract allows (a rating on the scale, an agreeing row) the command takes too
        assert code == 0, line


def test_a_frame_that_is_not_a_dataframe_is_refused():
    with pytest.raises(TypeError, match="pools table must be a pandas DataFrame"):
        store_from_frames({"prompt_id": ["p1"]})  # type: ignore[arg-type]


def test_the_store_is_in_memory_and_the_temporary_folder_is_gone(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    con = store_from_frames(POOLS, dataset="d", decisions={"j": DECISIONS})
    assert con.execute("SELECT database_name, path FROM duckdb_databases() WHERE NOT internal").fetchall() == [
        ("memory", None)]
    assert store.load_prompts(con, "d")["prompt_id"].tolist() == ["p1", "p2"]
    assert list(tmp_path.iterdir()) == []
