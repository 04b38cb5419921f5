"""JudgeActs ingest: round trip of the shared dev/main files, idempotence, bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from audit_core import store
from audit_core.errors import InputError
from audit_core.ingest import judgeacts
from audit_core.ingest.pools import write_dataset
from runners import ingest
from tests.support.paths import JUDGEACTS as DATA
from tests.support.snapshots import snapshot

SPLITS = {
    "dev": (DATA / "dev" / "data" / "derived" / "dev.jsonl", DATA / "dev" / "runs", "_dev"),
    "main": (DATA / "main" / "data" / "derived" / "main.jsonl", DATA / "main" / "runs", "_main"),
}
CLIP = DATA / "main" / "results" / "main" / "clip_scores.json"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared JudgeActs files are not available")


def run_ingest(db: Path, pools: Path, runs: dict[str, Path], dataset: str = "ds", *extra: str) -> int:
    argv = ["judgeacts", "--pools", str(pools), "--db", str(db), "--dataset", dataset, *extra]
    for name, path in runs.items():
        argv += ["--run", f"{name}={path}"]
    return ingest.main(argv)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_lines(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module", params=sorted(SPLITS))
def loaded(request, tmp_path_factory):
    split = request.param
    pools, runs_dir, suffix = SPLITS[split]
    runs = {name: runs_dir / f"{name}{suffix}.jsonl" for name in ("qwen", "smol")}
    db = tmp_path_factory.mktemp(split) / "store.duckdb"
    extra = ["--scores", f"clip={CLIP}"] if split == "main" else []
    assert run_ingest(db, pools, runs, split, *extra) == 0
    return split, db, pools, runs


def test_round_trip_pools(loaded):
    split, db, pools_file, _ = loaded
    source = read_lines(pools_file)
    con = store.connect(db, read_only=True)
    prompts = store.load_prompts(con, split).set_index("prompt_id")
    candidates = store.load_candidates(con, split).set_index("candidate_id")
    ratings = store.load_ratings(con, split).set_index("candidate_id")
    votes = store.load_votes(con, split)
    n = con.execute(
        "SELECT candidate_id, n FROM ratings WHERE dataset_id = ? AND outcome = 'alignment'", [split]
    ).fetchall()
    con.close()
    assert len(prompts) == len(source) == {"dev": 30, "main": 300}[split]
    assert len(candidates) == sum(len(p["candidates"]) for p in source)
    if split == "main":
        assert len(candidates) == 1100
    n = dict(n)
    vote_lists = votes[votes["outcome"] == "alignment"].groupby("candidate_id")["value"].apply(list).to_dict()
    for p in source:
        assert prompts.loc[p["prompt_id"], "prompt"] == p["prompt"]
        assert prompts.loc[p["prompt_id"], "country"] == p["country"]
        ids = sorted(c["id"] for c in p["candidates"])
        pool = candidates[candidates["prompt_id"] == p["prompt_id"]].sort_values("canonical_index")
        assert list(pool.index) == ids
        for c in p["candidates"]:
            assert candidates.loc[c["id"], "source_model"] == c["source_model"]
            assert ratings.loc[c["id"], "alignment"] == c["utility"]
            assert ratings.loc[c["id"], "overall"] == c["overall"]
            assert ratings.loc[c["id"], "stereotype"] == c["stereotype"]
            assert n[c["id"]] == c["n_utility"]
            # votes keep the annotators' order as listed in the source
            assert vote_lists[c["id"]] == c["alignment_ratings"]


def test_round_trip_calls(loaded):
    split, db, _, runs = loaded
    con = store.connect(db, read_only=True)
    calls = store.load_calls(con, split)
    con.close()
    for judge, path in runs.items():
        source = read_lines(path)
        mine = calls[calls["judge"] == judge].set_index(["prompt_id", "order_index"])
        assert len(mine) == len(source) == {"dev": 90, "main": 900}[split]
        for obj in source:
            call = mine.loc[(obj["prompt_id"], obj["permutation"])]
            assert list(call["slot_candidate_ids"]) == [obj["mapping"][k] for k in sorted(obj["mapping"])]
            assert call["raw_output"] == obj["raw_output"]
            assert call["seconds"] == obj["seconds"]
            if obj["parse_ok"]:
                assert call["status"] == ("recovered" if obj.get("recovered") else "ok")
                assert call["choice_label"] == obj["parsed"]["choice"]
                assert call["chosen_candidate_id"] == obj["selected_id"]
                assert call["chosen_candidate_id"] == obj["mapping"][obj["parsed"]["choice"]]
            else:
                assert call["status"] == "parse_fail"
                assert pd.isna(call["chosen_candidate_id"]) and pd.isna(call["choice_label"])


def test_scores_round_trip(loaded):
    split, db, _, _ = loaded
    con = store.connect(db, read_only=True)
    scores = store.load_scores(con, split)
    con.close()
    source = json.loads(CLIP.read_text())["scores"] if split == "main" else {}
    assert dict(zip(scores["candidate_id"], scores["score"])) == source


def test_reingest_is_idempotent(loaded):
    split, db, pools, runs = loaded
    before = snapshot(db)
    extra = ["--scores", f"clip={CLIP}"] if split == "main" else []
    assert run_ingest(db, pools, runs, split, *extra) == 0
    assert snapshot(db) == before


# ---------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def dev_db(tmp_path_factory):
    """A store that already holds the dev split with one judge."""
    db = tmp_path_factory.mktemp("devdb") / "store.duckdb"
    pools, runs_dir, _ = SPLITS["dev"]
    assert run_ingest(db, pools, {"qwen": runs_dir / "qwen_dev.jsonl"}, "dev") == 0
    return db


def corrupt_pools(tmp_path: Path, edit) -> Path:
    rows = read_lines(SPLITS["dev"][0])
    edit(rows)
    return write_lines(tmp_path / "dev.jsonl", rows)


def corrupt_run(tmp_path: Path, edit) -> Path:
    rows = read_lines(SPLITS["dev"][1] / "smol_dev.jsonl")
    edit(rows)
    return write_lines(tmp_path / "smol_dev.jsonl", rows)


def _set(rows, line, key, value):
    rows[line - 1][key] = value


def _set_candidate(rows, line, key, value):
    rows[line - 1]["candidates"][1][key] = value


def _drop_candidate_key(rows, line, key):
    del rows[line - 1]["candidates"][1][key]


POOL_CASES = {
    "missing rating": (lambda r: _drop_candidate_key(r, 5, "utility"), 5, "utility"),
    "non-numeric rating": (lambda r: _set_candidate(r, 7, "utility", "high"), 7, "candidates[1].utility"),
    "non-numeric vote": (lambda r: _set_candidate(r, 8, "alignment_ratings", [1.0, "x"]), 8, "alignment_ratings[1]"),
    "non-numeric count": (lambda r: _set_candidate(r, 8, "n_utility", "three"), 8, "n_utility"),
    "pool of one": (lambda r: _set(r, 9, "candidates", r[8]["candidates"][:1]), 9, "candidates"),
    "missing prompt text": (lambda r: r[2].pop("prompt"), 3, "prompt"),
    "repeated candidate": (lambda r: r[3]["candidates"].append(r[3]["candidates"][0]), 4, "candidate_id"),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_bad_pools_leave_database_unchanged(case, dev_db, tmp_path, capsys):
    edit, line, field = POOL_CASES[case]
    bad = corrupt_pools(tmp_path, edit)
    before = snapshot(dev_db)
    assert run_ingest(dev_db, bad, {}, "other") == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}" in err and field in err
    assert snapshot(dev_db) == before


def test_malformed_pools_line(dev_db, tmp_path, capsys):
    lines = SPLITS["dev"][0].read_text().splitlines()
    lines[11] = lines[11][:-5]
    bad = tmp_path / "dev.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    before = snapshot(dev_db)
    assert run_ingest(dev_db, bad, {}, "other") == 2
    assert f"{bad} line 12: not valid JSON" in capsys.readouterr().err
    assert snapshot(dev_db) == before


def _remap_unchosen(call: dict, candidate_id: str) -> None:
    """Point a slot the judge did not choose at another candidate id."""
    label = next(k for k in sorted(call["mapping"]) if k != (call.get("parsed") or {}).get("choice"))
    call["mapping"][label] = candidate_id


RUN_CASES = {
    "unknown prompt": (lambda r: _set(r, 4, "prompt_id", "nope"), 4, "prompt_id", "unknown prompt id 'nope'"),
    "unknown candidate": (
        lambda r: _remap_unchosen(r[5], r[5]["mapping"]["A"] + "_x"), 6, "mapping", "is not a candidate of prompt"
    ),
    "candidate from another pool": (
        lambda r: _remap_unchosen(r[5], r[40]["mapping"]["A"]), 6, "mapping", "is not a candidate of prompt"
    ),
    "duplicate call": (lambda r: r.insert(20, dict(r[10])), 21, "permutation", "duplicate call"),
    "selected id disagrees with label": (
        lambda r: _set(r, 3, "selected_id", r[2]["mapping"]["A" if r[2]["parsed"]["choice"] != "A" else "B"]),
        3,
        "selected_id",
        "maps to",
    ),
    "choice not a label": (lambda r: r[1]["parsed"].update(choice="Z"), 2, "parsed.choice", "not a shown label"),
    "non-numeric seconds": (lambda r: _set(r, 7, "seconds", "fast"), 7, "seconds", "expected a number"),
    "no parse flag": (lambda r: r[8].pop("parse_ok"), 9, "parse_ok", "true or false"),
    "bad labels": (lambda r: r[0]["mapping"].update(Q=r[0]["mapping"].pop("A")), 1, "mapping", "slot labels"),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_bad_runs_leave_database_unchanged(case, dev_db, tmp_path, capsys):
    edit, line, field, message = RUN_CASES[case]
    bad = corrupt_run(tmp_path, edit)
    before = snapshot(dev_db)
    assert run_ingest(dev_db, SPLITS["dev"][0], {"smol": bad}, "dev") == 2
    err = capsys.readouterr().err
    assert f"{bad} line {line}, field '{field}'" in err and message in err
    assert snapshot(dev_db) == before


def test_bad_input_never_creates_the_database(tmp_path):
    bad = corrupt_pools(tmp_path, lambda r: _set_candidate(r, 2, "utility", None))
    db = tmp_path / "new.duckdb"
    assert run_ingest(db, bad, {}, "dev") == 2
    assert not db.exists()


def test_late_failure_rolls_back_everything(tmp_path):
    """A run that fails inside the transaction takes the freshly written pools with it."""
    db = tmp_path / "store.duckdb"
    pools, runs_dir, _ = SPLITS["dev"]
    assert run_ingest(db, pools, {"qwen": runs_dir / "qwen_dev.jsonl"}, "dev") == 0
    before = snapshot(db)
    other = runs_dir / "smol_dev.jsonl"
    # same judge name, different file: refused inside the transaction after new pools were written
    assert run_ingest(db, pools, {"qwen": other}, "dev") == 2
    assert run_ingest(db, pools, {"smol": runs_dir / "smol_dev.jsonl", "qwen": other}, "dev") == 2
    assert snapshot(db) == before


def test_replace_swaps_a_judge(tmp_path):
    db = tmp_path / "store.duckdb"
    pools, runs_dir, _ = SPLITS["dev"]
    assert run_ingest(db, pools, {"qwen": runs_dir / "qwen_dev.jsonl"}, "dev") == 0
    assert run_ingest(db, pools, {"qwen": runs_dir / "smol_dev.jsonl"}, "dev", "--replace") == 0
    con = store.connect(db, read_only=True)
    calls = store.load_calls(con, "dev")
    runs = store.load_runs(con, "dev")
    con.close()
    assert len(runs) == 1 and len(calls) == 90
    assert set(calls["status"]) == {"recovered", "parse_fail"}


def test_check_calls_requires_whole_pool(tmp_path):
    """A call that shows only part of the pool is refused (in-memory path)."""
    pools = judgeacts.read_pools(SPLITS["dev"][0], "dev")
    run = judgeacts.read_run(SPLITS["dev"][1] / "qwen_dev.jsonl", "qwen")
    slots = run.calls.at[0, "slot_candidate_ids"]
    run.calls.at[0, "slot_candidate_ids"] = [s for s in slots if s != run.calls.at[0, "chosen_candidate_id"]][:2] + [
        run.calls.at[0, "chosen_candidate_id"]
    ]
    run.calls.at[0, "choice_label"] = "C"
    with pytest.raises(InputError, match="misses"):
        write_dataset(tmp_path / "x.duckdb", pools, [run])
    assert not (tmp_path / "x.duckdb").exists()


# ---------------------------------------------------------------- whole classes of bad input


def _ingest_fails(db: Path, pools: Path, runs: dict[str, Path], expected: str, capsys, *extra: str) -> str:
    """Ingest into `db` (existing or not) must fail with `expected` in the message and change nothing."""
    before = snapshot(db)
    assert run_ingest(db, pools, runs, "other" if not runs else "dev", *extra) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert snapshot(db) == before
    return err


def test_byte_order_mark_is_accepted(tmp_path):
    pools = tmp_path / "dev.jsonl"
    pools.write_bytes(b"\xef\xbb\xbf" + SPLITS["dev"][0].read_bytes())
    run = tmp_path / "qwen_dev.jsonl"
    run.write_bytes(b"\xef\xbb\xbf" + (SPLITS["dev"][1] / "qwen_dev.jsonl").read_bytes())
    scores = tmp_path / "clip.json"
    scores.write_bytes(b"\xef\xbb\xbf" + json.dumps({"scores": {}}).encode())
    db = tmp_path / "store.duckdb"
    assert run_ingest(db, pools, {"qwen": run}, "dev") == 0
    con = store.connect(db, read_only=True)
    assert len(store.load_prompts(con, "dev")) == 30 and len(store.load_calls(con, "dev")) == 90
    con.close()
    assert judgeacts.read_scores(scores, "clip").scores.empty


def test_bytes_that_are_not_utf8_name_line_and_field(dev_db, tmp_path, capsys):
    lines = SPLITS["dev"][0].read_bytes().split(b"\n")
    lines[6] = lines[6].replace(b'"prompt": "', b'"prompt": "\xe9t\xe9 ', 1)
    pools = tmp_path / "dev.jsonl"
    pools.write_bytes(b"\n".join(lines))
    _ingest_fails(dev_db, pools, {}, f"{pools} line 7, field 'prompt': not UTF-8 text (byte 0xe9", capsys)
    run = corrupt_run(tmp_path, lambda r: None)
    lines = run.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"raw_output": "', b'"raw_output": "\xc3(', 1)
    run.write_bytes(b"\n".join(lines))
    _ingest_fails(dev_db, SPLITS["dev"][0], {"smol": run}, f"{run} line 4, field 'raw_output': not UTF-8 text", capsys)
    outside = tmp_path / "clip.json"
    outside.write_bytes(b'{"model": "clip\xff", "scores": {}}')
    _ingest_fails(dev_db, SPLITS["dev"][0], {"qwen": SPLITS["dev"][1] / "qwen_dev.jsonl"},
                  f"{outside} line 1, field 'model': not UTF-8 text (byte 0xff", capsys, "--scores", f"clip={outside}")
    lines = SPLITS["dev"][0].read_bytes().split(b"\n")
    lines[2] = b"\xff" + lines[2]
    pools.write_bytes(b"\n".join(lines))
    _ingest_fails(dev_db, pools, {}, f"{pools} line 3: byte 0xff at column 1 is not UTF-8", capsys)


def test_lone_surrogate_escape_is_not_text(dev_db, tmp_path, capsys):
    run = corrupt_run(tmp_path, lambda r: _set(r, 5, "raw_output", "\ud800"))  # json.dumps writes "\ud800"
    _ingest_fails(dev_db, SPLITS["dev"][0], {"smol": run}, f"{run} line 5, field 'raw_output': not text (lone surrogate", capsys)


INTEGER_CASES = {
    "permutation beyond 32 bits": ("run", lambda r: _set(r, 4, "permutation", 2**32), 4, "permutation"),
    "permutation beyond 64 bits": ("run", lambda r: _set(r, 4, "permutation", 2**64 + 1), 4, "permutation"),
    "count beyond INTEGER": ("pools", lambda r: _set_candidate(r, 3, "n_utility", 2**31), 3, "candidates[1].n_utility"),
}


@pytest.mark.parametrize("case", sorted(INTEGER_CASES))
def test_integers_beyond_the_column_type(case, dev_db, tmp_path, capsys):
    kind, edit, line, field = INTEGER_CASES[case]
    pools = corrupt_pools(tmp_path, edit) if kind == "pools" else SPLITS["dev"][0]
    runs = {"smol": corrupt_run(tmp_path, edit)} if kind == "run" else {}
    bad = pools if kind == "pools" else runs["smol"]
    expected = f"{bad} line {line}, field '{field}': expected an integer from"
    _ingest_fails(dev_db, pools, runs, expected, capsys)
    new_db = tmp_path / "new" / "store.duckdb"
    _ingest_fails(new_db, pools, runs, expected, capsys)
    assert not (tmp_path / "new").exists()


TYPE_CASES = {
    "object as country": ("pools", lambda r: _set(r, 2, "country", {"name": "Brazil"}), 2, "country"),
    "list as source model": ("pools", lambda r: _set_candidate(r, 3, "source_model", ["SD"]), 3,
                             "candidates[1].source_model"),
    "number as image path": ("pools", lambda r: _set_candidate(r, 4, "image", 17), 4, "candidates[1].image"),
    "text as votes": ("pools", lambda r: _set_candidate(r, 4, "alignment_ratings", "1, 0.5"), 4,
                      "candidates[1].alignment_ratings"),
    "ranking as text": ("run", lambda r: r[2]["parsed"].update(ranking="C, A, B"), 3, "parsed.ranking"),
    "ranking of numbers": ("run", lambda r: r[2]["parsed"].update(ranking=[1, 2, 3]), 3, "parsed.ranking"),
    "parsed as text": ("run", lambda r: _set(r, 2, "parsed", "A"), 2, "parsed"),
    "recovered as text": ("run", lambda r: _set(r, 6, "recovered", "no"), 6, "recovered"),
    "object as model": ("run", lambda r: _set(r, 6, "model", {"name": "smol"}), 6, "model"),
    "object as parse error": ("run", lambda r: _set(r, 6, "parse_error", {"why": "x"}), 6, "parse_error"),
}


@pytest.mark.parametrize("case", sorted(TYPE_CASES))
def test_wrong_json_types_are_refused(case, dev_db, tmp_path, capsys):
    kind, edit, line, field = TYPE_CASES[case]
    pools = corrupt_pools(tmp_path, edit) if kind == "pools" else SPLITS["dev"][0]
    runs = {"smol": corrupt_run(tmp_path, edit)} if kind == "run" else {}
    bad = pools if kind == "pools" else runs["smol"]
    _ingest_fails(dev_db, pools, runs, f"{bad} line {line}, field '{field}': expected", capsys)


def test_scores_model_must_be_text(dev_db, tmp_path, capsys):
    scores = tmp_path / "clip.json"
    scores.write_text(json.dumps({"model": ["clip"], "scores": {}}))
    _ingest_fails(dev_db, SPLITS["dev"][0], {"qwen": SPLITS["dev"][1] / "qwen_dev.jsonl"},
                  f"{scores}, field 'model': expected text, got ['clip']", capsys, "--scores", f"clip={scores}")


SCALE_CASES = {
    "utility above 1": (lambda r: _set_candidate(r, 5, "utility", 1.5), 5, "candidates[1].utility", "alignment"),
    "stereotype rate of 2": (lambda r: _set_candidate(r, 5, "stereotype", 2), 5, "candidates[1].stereotype", "stereotype"),
    "negative vote": (lambda r: _set_candidate(r, 6, "alignment_ratings", [1.0, -1.0]), 6,
                      "candidates[1].alignment_ratings[1]", "alignment"),
}


@pytest.mark.parametrize("case", sorted(SCALE_CASES))
def test_ratings_off_their_outcome_scale(case, dev_db, tmp_path, capsys):
    edit, line, field, outcome = SCALE_CASES[case]
    bad = corrupt_pools(tmp_path, edit)
    _ingest_fails(dev_db, bad, {}, f"{bad} line {line}, field '{field}': {outcome} rating", capsys)
    assert "off its scale [0, 1]" in _ingest_fails(dev_db, bad, {}, "", capsys)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e999", "-1e400"])
def test_non_finite_json_numbers_are_refused(literal, dev_db, tmp_path, capsys):
    lines = SPLITS["dev"][0].read_text().split("\n")
    lines[3] = lines[3].replace('"utility": ', f'"utility": {literal}, "was": ', 1)
    bad = tmp_path / "dev.jsonl"
    bad.write_text("\n".join(lines))
    _ingest_fails(dev_db, bad, {}, f"{bad} line 4, field 'candidates[0].utility': expected a finite number", capsys)


def _artifact(tmp_path: Path, image: str) -> Path:
    """The dev pools laid out as an artifact (data/derived/dev.jsonl) whose first candidate names `image`."""
    rows = read_lines(SPLITS["dev"][0])
    rows[0]["candidates"][0]["image"] = image
    derived = tmp_path / "art" / "data" / "derived"
    derived.mkdir(parents=True, exist_ok=True)
    return write_lines(derived / "dev.jsonl", rows)


def _png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (5, 5), (0, 120, 0)).save(out, format="PNG")
    return out.getvalue()


def test_images_are_confined_to_the_artifact_and_decoded(tmp_path, capsys):
    images = tmp_path / "art" / "data" / "images"
    images.mkdir(parents=True)
    (images / "ok.png").write_bytes(_png_bytes())
    (images / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    (tmp_path / "secret.png").write_bytes(_png_bytes())
    (images / "link.png").symlink_to(tmp_path / "secret.png")
    cases = {
        str(tmp_path / "secret.png"): "absolute path",
        "../secret.png": "leads outside",
        "data/images/../../../secret.png": "leads outside",
        "data/images/link.png": "leads outside",
        "data/images/bad.png": "image cannot be decoded",
    }
    db = tmp_path / "store.duckdb"
    for image, message in cases.items():
        pools = _artifact(tmp_path, image)
        assert run_ingest(db, pools, {}, "dev") == 2, image
        err = capsys.readouterr().err
        assert f"{pools} line 1, field 'candidates[0].image': " in err and message in err, err
        assert not db.exists()
    assert run_ingest(db, _artifact(tmp_path, "data/images/ok.png"), {}, "dev") == 0
    con = store.connect(db, read_only=True)
    paths = store.load_candidates(con, "dev")["image_path"].dropna().tolist()
    con.close()
    assert paths == [str((images / "ok.png").resolve())]  # the absent images of the other candidates stay absent
