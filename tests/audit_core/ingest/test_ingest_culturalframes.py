"""CulturalFrames ingest on a tiny fake release (annotations JSON + parquet shards of PNGs)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from audit_core import store
from audit_core.ingest import culturalframes
from runners import ingest
from tests.support.snapshots import snapshot

MODELS = ("m1", "m2", "m3", "m4")
# prompt id -> (country, category, text, models with an image)
PROMPTS = {
    "j1": ("Japan", "food", "Family eating sushi at home", MODELS),
    "j2": ("Japan", "religion", "A Shinto wedding at a shrine", MODELS[:3]),
    "j3": ("Japan", "greetings", "Two colleagues bowing", MODELS),
    "j4": ("Japan", "festival", "Children at Tanabata", MODELS[:3]),
    "j5": ("Japan", "religion", "a shinto  wedding at a Shrine", MODELS),  # repeats j2's text
    "p1": ("Peru", "food", "Ceviche on a market stall", MODELS),
    "p2": ("Peru", "festival", "Inti Raymi dancers", MODELS[:3]),
    "p3": ("Peru", "greetings", "Neighbours greeting with a kiss", MODELS),
    "p4": ("Peru", "religion", "Procession of the Lord of Miracles", MODELS[:3]),  # one unannotated → 2 left
}


def png(seed: int) -> bytes:
    image = Image.new("RGB", (8, 6), (seed * 37 % 256, seed * 91 % 256, seed * 53 % 256))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def annotation(k: int, *, score: float = 1.0, stereotype: bool | None = False) -> dict:
    record = {
        "annotator_id": f"a{k}",
        "prompt_alignment": {"score": score, "missing_explicit": k == 2, "missing_implicit": []},
        "image_quality": {"score": 0.5},
        "overall_score": 2 + k,
    }
    if stereotype is not None:
        record["stereotype"] = {"is_stereotypical": stereotype}
    return record


def make_records() -> list[dict]:
    records = []
    for n, (pid, (country, category, text, models)) in enumerate(PROMPTS.items()):
        for i, model in enumerate(models):
            scores = [(0.0, 0.5, 1.0)[(n + i + k) % 3] for k in range(3)]
            anns = [annotation(k, score=s) for k, s in enumerate(scores)]
            if pid == "p4" and model == "m3":
                anns = [{"annotator_id": "a0", "image_quality": {"score": 1}}]  # no alignment score
            if pid == "j1" and model == "m1":
                anns[1]["stereotype"] = None  # absent: never imputed
            records.append({"id": pid, "prompt": text, "country": country, "category": category,
                            "model_name": model, "human_annotations": anns})
    records.append({"id": "p3", "prompt": PROMPTS["p3"][2], "country": "Peru", "category": "greetings",
                    "model_name": "m9", "human_annotations": [annotation(0)]})  # no image in any shard
    return records


def make_images() -> list[dict]:
    rows = []
    for n, (pid, (country, _, text, models)) in enumerate(PROMPTS.items()):
        for i, model in enumerate(models):
            rows.append({"id": f"{pid}_{model}", "image": {"bytes": png(10 * n + i), "path": None},
                         "prompt": text, "country": country, "model": model})
    rows.append({"id": "zz_m1", "image": {"bytes": png(99), "path": None}, "prompt": "orphan",
                 "country": "Peru", "model": "m1"})  # no annotation record
    return rows


def write_release(root: Path, records: list[dict] | None = None, images: list[dict] | None = None) -> Path:
    records = make_records() if records is None else records
    images = make_images() if images is None else images
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / culturalframes.ANNOTATIONS_FILE).write_text(json.dumps(records, indent=1))
    half = len(images) // 2
    pd.DataFrame(images[:half]).to_parquet(root / "data" / "train-00000-of-00002.parquet")
    pd.DataFrame(images[half:]).to_parquet(root / "data" / "train-00001-of-00002.parquet")
    return root


def run_cf(release: Path, db: Path, images: Path, *extra: str, dataset: str = "cf") -> int:
    return ingest.main(["culturalframes", "--release", str(release), "--db", str(db), "--dataset", dataset,
                        "--images-dir", str(images), *extra])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("cf")
    release = write_release(root / "release")
    db, images = root / "store.duckdb", root / "images" / "cf"
    return release, db, images


def test_ingest_all(loaded, capsys):
    release, db, images = loaded
    assert run_cf(release, db, images) == 0
    out = capsys.readouterr().out
    assert "1 pools with fewer than 3 annotated candidates" in out
    assert "1 pools repeating a prompt text within their country" in out
    assert "1 annotation records without an image" in out
    assert "1 image rows without an annotation record" in out
    assert "1 images without an alignment score" in out
    assert "absent annotation values (skipped, never imputed)" in out and "stereotype 2" in out
    con = store.connect(db, read_only=True)
    prompts = store.load_prompts(con, "cf").set_index("prompt_id")
    cands = store.load_candidates(con, "cf").set_index("candidate_id")
    ratings = con.execute(
        "SELECT candidate_id, outcome, value, n FROM ratings WHERE dataset_id = 'cf'"
    ).df().set_index(["candidate_id", "outcome"])
    votes = store.load_votes(con, "cf")
    con.close()
    # p4 dropped (2 annotated), j5 dropped (j2 text repeated; j5 is larger, so j5 is kept instead of j2)
    assert sorted(prompts.index) == ["j1", "j3", "j4", "j5", "p1", "p2", "p3"]
    assert prompts.loc["j5", "country"] == "Japan" and prompts.loc["p2", "category"] == "festival"
    assert len(cands) == 4 + 4 + 3 + 4 + 4 + 3 + 4
    records = {f"{r['id']}_{r['model_name']}": r for r in make_records()}
    sources = {row["id"]: row["image"]["bytes"] for row in make_images()}
    for cid, cand in cands.iterrows():
        anns = records[cid]["human_annotations"]
        scores = [a["prompt_alignment"]["score"] for a in anns]
        assert ratings.loc[(cid, "alignment"), "value"] == pytest.approx(sum(scores) / len(scores))
        assert ratings.loc[(cid, "alignment"), "n"] == len(scores)
        overall = [(a["overall_score"] - 1) / 4 for a in anns]
        assert ratings.loc[(cid, "overall"), "value"] == pytest.approx(sum(overall) / len(overall))
        assert ratings.loc[(cid, "missing_explicit"), "value"] == pytest.approx(1 / 3)
        assert ratings.loc[(cid, "missing_implicit"), "value"] == 0.0
        assert cand["source_model"] == records[cid]["model_name"]
        path = Path(cand["image_path"])
        assert path.parent == images.resolve() and path.suffix == ".png"
        assert path.read_bytes() == sources[cid]
        mine = votes[(votes["candidate_id"] == cid) & (votes["outcome"] == "alignment")]
        assert list(mine["value"]) == scores and list(mine["annotator"]) == ["a0", "a1", "a2"]
    assert ratings.loc[("j1_m1", "stereotype"), "n"] == 2  # the absent value is not imputed
    assert sorted(p.name for p in images.iterdir()) == sorted(f"{c}.png" for c in cands.index)
    assert not [p for p in images.parent.iterdir() if "staging" in p.name]


def test_reingest_is_idempotent(loaded, capsys):
    release, db, images = loaded
    before = snapshot(db)
    files = {p.name: p.read_bytes() for p in images.iterdir()}
    assert run_cf(release, db, images) == 0
    assert "pools: unchanged" in capsys.readouterr().out
    assert snapshot(db) == before
    assert {p.name: p.read_bytes() for p in images.iterdir()} == files


def test_split_is_frozen_by_seeded_hash(loaded, tmp_path):
    release, _, _ = loaded
    db = tmp_path / "s.duckdb"
    args = ("--per-country-dev", "1", "--per-country-main", "2", "--seed", "7")
    assert run_cf(release, db, tmp_path / "img" / "all", *args, dataset="all") == 0
    assert run_cf(release, db, tmp_path / "img" / "dev", *args, "--split", "dev", dataset="dev") == 0
    con = store.connect(db, read_only=True)
    every = store.load_prompts(con, "all")
    dev = store.load_prompts(con, "dev")
    con.close()
    counts = every.groupby(["country", "split"]).size().to_dict()
    assert counts == {("Japan", "dev"): 1, ("Japan", "main"): 2, ("Japan", "extra"): 1,
                      ("Peru", "dev"): 1, ("Peru", "main"): 2}
    assert list(dev["prompt_id"]) == list(every.loc[every["split"] == "dev", "prompt_id"])
    assert set(dev["split"]) == {"dev"}
    sizes = {pid: len(models) for pid, (_, _, _, models) in PROMPTS.items()}
    written = len(list((tmp_path / "img" / "dev").iterdir()))
    assert written == sum(sizes[pid] for pid in dev["prompt_id"])  # only the dev pools' images


def test_split_depends_only_on_seed_and_ids():
    pools = pd.DataFrame({"prompt_id": [f"x{i}" for i in range(20)], "country": ["A"] * 10 + ["B"] * 10})
    a = culturalframes.frozen_split(pools, 3, 5, seed=1)
    b = culturalframes.frozen_split(pools.iloc[::-1], 3, 5, seed=1).sort_index()
    assert list(a) == list(b)
    assert a.groupby(pools["country"]).value_counts().to_dict() == {
        ("A", "main"): 5, ("A", "dev"): 3, ("A", "extra"): 2, ("B", "main"): 5, ("B", "dev"): 3, ("B", "extra"): 2}
    assert list(culturalframes.frozen_split(pools, 3, 5, seed=2)) != list(a)


# ---------------------------------------------------------------- bad input


def _corrupt_image(images):
    images[3]["image"]["bytes"] = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40
    return images


def _truncate_image(images):
    images[20]["image"]["bytes"] = images[20]["image"]["bytes"][:-30]
    return images


def _mismatch_prompt(images):
    images[14]["prompt"] = "Something else"
    return images


def _duplicate_image(images):
    images.append(dict(images[0]))
    return images


def _record(index: int, **changes):
    def edit(records):
        records[index].update(changes)
        return records
    return edit


def _bad_score(records):
    records[2]["human_annotations"][1]["prompt_alignment"]["score"] = 0.7
    return records


def _text_score(records):
    records[4]["human_annotations"][0]["overall_score"] = "good"
    return records


IMAGE_CASES = {
    "undecodable image": (_corrupt_image, "train-00000-of-00002.parquet", 4, "image.bytes", "cannot be decoded"),
    "truncated image": (_truncate_image, "train-00001-of-00002.parquet", 5, "image.bytes", "cannot be decoded"),
    "prompt disagrees": (_mismatch_prompt, "train-00000-of-00002.parquet", 15, "prompt", "disagrees"),
    "repeated image id": (_duplicate_image, "train-00001-of-00002.parquet", 17, "id", "already appeared"),
}
RECORD_CASES = {
    "score off the scale": (_bad_score, "human_annotations[1].prompt_alignment.score", "expected 0, 0.5 or 1"),
    "non-numeric overall": (_text_score, "human_annotations[0].overall_score", "from 1 to 5"),
    "missing prompt": (_record(5, prompt=None), "prompt", "missing"),
    "repeated record": (_record(5, model_name="m1"), "id", "annotated again"),
    "country disagrees": (_record(6, country="Chile"), "country", "on line"),
}


def _assert_untouched(db, images, before):
    assert snapshot(db) == before
    assert not images.exists() or not list(images.iterdir())
    assert not [p for p in images.parent.rglob("*") if "staging" in p.name]


@pytest.mark.parametrize("case", sorted(IMAGE_CASES))
def test_bad_image_rows(case, loaded, tmp_path, capsys):
    edit, shard, row, field, message = IMAGE_CASES[case]
    _, db, _ = loaded
    release = write_release(tmp_path / "rel", images=edit(make_images()))
    images = tmp_path / "img" / "bad"
    before = snapshot(db)
    assert run_cf(release, db, images, dataset="bad") == 2
    err = capsys.readouterr().err
    assert f"{release / 'data' / shard} line {row}, field '{field}'" in err and message in err, err
    _assert_untouched(db, images, before)
    assert not (tmp_path / "img").exists()  # folders made for staging are removed again


@pytest.mark.parametrize("case", sorted(RECORD_CASES))
def test_bad_annotation_records(case, loaded, tmp_path, capsys):
    edit, field, message = RECORD_CASES[case]
    _, db, _ = loaded
    records = edit(make_records())
    release = write_release(tmp_path / "rel", records=records)
    images = tmp_path / "img" / "bad"
    before = snapshot(db)
    assert run_cf(release, db, images, dataset="bad") == 2
    err = capsys.readouterr().err
    assert f"{release / culturalframes.ANNOTATIONS_FILE} line " in err and f"field '{field}'" in err and message in err, err
    _assert_untouched(db, images, before)


def test_record_errors_name_the_record_line(tmp_path, capsys):
    records = _bad_score(make_records())
    release = write_release(tmp_path / "rel", records=records)
    text = (release / culturalframes.ANNOTATIONS_FILE).read_text().splitlines()
    # json.dumps(indent=1) starts record i on the line holding ' {' number i
    starts = [n for n, line in enumerate(text, start=1) if line == " {"]
    assert run_cf(release, tmp_path / "x.duckdb", tmp_path / "img") == 2
    assert f"line {starts[2]}, field" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()


def test_malformed_annotations_json(tmp_path, capsys):
    release = write_release(tmp_path / "rel")
    path = release / culturalframes.ANNOTATIONS_FILE
    lines = path.read_text().splitlines()
    lines.insert(30, "  oops,")
    path.write_text("\n".join(lines))
    assert run_cf(release, tmp_path / "x.duckdb", tmp_path / "img") == 2
    assert f"{path} line 31: not valid JSON" in capsys.readouterr().err


def test_nothing_left_is_an_error(tmp_path, capsys):
    records = [r for r in make_records() if r["model_name"] in ("m1", "m2")]
    release = write_release(tmp_path / "rel", records=records)
    assert run_cf(release, tmp_path / "x.duckdb", tmp_path / "img") == 2
    assert "no pool is left" in capsys.readouterr().err


# ---------------------------------------------------------------- whole classes of bad input


def _record_lines(path: Path) -> list[int]:
    """Line on which each record starts (json.dumps(indent=1) opens record i on the i-th ' {' line)."""
    return [n for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1) if line == " {"]


def test_byte_order_mark_is_accepted(tmp_path):
    release = write_release(tmp_path / "rel")
    path = release / culturalframes.ANNOTATIONS_FILE
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    db = tmp_path / "x.duckdb"
    assert run_cf(release, db, tmp_path / "img") == 0
    con = store.connect(db, read_only=True)
    assert len(store.load_prompts(con, "cf")) == 7
    con.close()


def test_bytes_that_are_not_utf8_name_line_and_field(loaded, tmp_path, capsys):
    _, db, _ = loaded
    release = write_release(tmp_path / "rel")
    path = release / culturalframes.ANNOTATIONS_FILE
    starts = _record_lines(path)
    path.write_bytes(path.read_bytes().replace(b'"Two colleagues bowing"', b'"Two colleagues \xff bowing"', 1))
    images = tmp_path / "img" / "bad"
    before = snapshot(db)
    assert run_cf(release, db, images, dataset="bad") == 2
    err = capsys.readouterr().err
    first = next(i for i, r in enumerate(make_records()) if r["id"] == "j3")
    assert f"{path} line {starts[first] + 2}, field 'prompt': not UTF-8 text (byte 0xff" in err, err
    _assert_untouched(db, images, before)


def _huge_overall(records):
    records[4]["human_annotations"][1]["overall_score"] = 10**400
    return records


def _huge_score(records):
    records[4]["human_annotations"][0]["prompt_alignment"]["score"] = -(10**400)
    return records


def _object_country(records):
    records[4]["country"] = {"name": "Japan"}
    return records


def _list_annotator(records):
    records[4]["human_annotations"][2]["annotator_id"] = ["a2"]
    return records


TYPE_CASES = {
    "overall beyond the float range": (_huge_overall, "human_annotations[1].overall_score", "from 1 to 5"),
    "score beyond the float range": (_huge_score, "human_annotations[0].prompt_alignment.score", "0, 0.5 or 1"),
    "object as country": (_object_country, "country", "expected text"),
    "list as annotator": (_list_annotator, "human_annotations[2].annotator_id", "expected text or an integer"),
}


@pytest.mark.parametrize("case", sorted(TYPE_CASES))
def test_wrong_types_and_huge_numbers_are_refused(case, loaded, tmp_path, capsys):
    edit, field, message = TYPE_CASES[case]
    _, db, _ = loaded
    release = write_release(tmp_path / "rel", records=edit(make_records()))
    path = release / culturalframes.ANNOTATIONS_FILE
    images = tmp_path / "img" / "bad"
    before = snapshot(db)
    assert run_cf(release, db, images, dataset="bad") == 2
    err = capsys.readouterr().err
    assert f"{path} line {_record_lines(path)[4]}, field '{field}': " in err and message in err, err
    _assert_untouched(db, images, before)
    assert run_cf(release, tmp_path / "new" / "x.duckdb", images, dataset="bad") == 2
    assert not (tmp_path / "new").exists()


def test_shard_text_that_is_not_utf8_names_row_and_column(loaded, tmp_path, capsys):
    _, db, _ = loaded
    release = write_release(tmp_path / "rel")
    rows = make_images()[:5]
    raw = [r["prompt"].encode() for r in rows]
    raw[3] = b"Inti \xff Raymi"
    table = pa.table({
        "id": [r["id"] for r in rows],
        "image": pa.array([r["image"] for r in rows]),
        "prompt": pa.array(raw, pa.binary()).view(pa.string()),
        "country": [r["country"] for r in rows],
        "model": [r["model"] for r in rows],
    })
    shard = release / "data" / "train-00000-of-00002.parquet"
    pq.write_table(table, shard)
    images = tmp_path / "img" / "bad"
    before = snapshot(db)
    assert run_cf(release, db, images, dataset="bad") == 2
    err = capsys.readouterr().err
    assert f"{shard} line 4, field 'prompt': not UTF-8 text" in err, err
    _assert_untouched(db, images, before)


def test_a_dataset_name_cannot_place_images_outside_the_images_folder(tmp_path, capsys, monkeypatch):
    release = write_release(tmp_path / "rel")
    monkeypatch.chdir(tmp_path)
    code = ingest.main(["culturalframes", "--release", str(release), "--db", str(tmp_path / "x.duckdb"),
                        "--dataset", "../../escaped"])
    assert code == 2 and "cannot name the images folder; pass --images-dir" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists() and not (tmp_path / "data").exists()
