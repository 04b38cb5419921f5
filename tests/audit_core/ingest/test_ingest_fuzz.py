"""Fuzzing every ingest path: a damaged input is ingested or refused cleanly, never half-way.

Each target starts from small valid files built here (JudgeActs pools, run and
scores; table pools as CSV, JSONL and Parquet, votes, decisions, scores, a
rating judge's ratings, gold labels, an attribute judge's answers and the taxonomy;
CulturalFrames annotations and an image shard) and damages one of them:
truncation, byte flips and insertions (invalid UTF-8, BOMs, NULs, control
characters), or a field swapped for a value of the wrong type, a huge one, an
odd number spelling, a path leaving the folder, another row's id. For every
damaged input, `runners.ingest.main` either succeeds or exits 2 naming the
input on stderr; no exception escapes; on failure an existing database is
exactly as before and a new database path is left with no file at all.

Then whole classes of hostile input, each refused in one error line, exit 2,
the database unchanged: a FIFO, `/dev/zero`, `/dev/urandom` or a directory
(given directly or through a symlink) in place of every input file, in a child
process with a deadline so a blocking read fails rather than hangs; headers of
100,000 columns; 5 MB values quoted in errors (stderr stays a few KB); and names
that are blank (whitespace, zero-width and direction characters) in every flag
and file field that names something.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY
from audit_core.ingest import culturalframes
from runners import ingest
from tests.support.isolated import run_isolated
from tests.support.refusals import BLANK_CHARACTERS, error_line, make_special
from tests.support.snapshots import snapshot

EXAMPLES = 10  # per target; the whole file runs in well under 30 s
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run, so a failure reproduces
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ODD_VALUES = [
    None, True, False, 0, -1, 1.5, -0.0, 2**31, -(2**31) - 1, 2**63, 10**400, float("nan"), float("inf"),
    "", " ", "1_0", "\u0661\u0662", "nan", "inf", "1e999", "0x1A", "2", "-1", "\ufeffp0", "\x00", "\x07\x1b[31m",
    "\u202eevil", "\U0001f44d\U0001f3fd", "\ud800", "../../../etc/passwd", "/etc/passwd", "img", "A|B|C",
    [], {}, ["A"], {"a": 1}, [[1]], [None], "x" * 100_000,
]
INSERTS = [
    b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b'"', b",", b"\n", b"\r", b"|", b"{", b"]",
    b"\\ud800", b"NaN", b"1e999", b"9" * 5000, "\u00e9\u202e".encode(), b"\x1b",
]


def png(seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (6, 4), (seed * 40 % 256, seed * 90 % 256, 7)).save(out, format="PNG")
    return out.getvalue()


# ---------------------------------------------------------------- valid inputs

PIDS = ("p0", "p1", "p2")
MODELS = ("m0", "m1", "m2")


def cids(pid: str) -> list[str]:
    return [f"{pid}_{m}" for m in MODELS]


def ja_pools() -> list[dict]:
    return [
        {"prompt_id": pid, "prompt": f"A market scene {i}", "country": ["Peru", "Japan"][i % 2], "category": "food",
         "candidates": [{"id": cid, "source_model": cid[-2:], "image": f"data/images/{cid}.png" if i == 0 else None,
                         "utility": (i + j) % 3 / 2, "n_utility": 2, "stereotype": 0.5, "n_stereotype": 2,
                         "alignment_ratings": [(i + j) % 3 / 2] * 2}
                        for j, cid in enumerate(cids(pid))]}
        for i, pid in enumerate(PIDS)
    ]


def ja_run() -> list[dict]:
    rows = []
    for pid in PIDS:
        for order in (0, 1):
            slots = cids(pid)[order:] + cids(pid)[:order]
            ok = not (pid == "p2" and order == 1)
            rows.append({"prompt_id": pid, "model": "judge", "permutation": order,
                         "mapping": dict(zip("ABC", slots)), "parse_ok": ok, "attempts": [],
                         "raw_output": '{"choice": "B"}' if ok else "no idea",
                         "parsed": {"choice": "B", "ranking": ["B", "A", "C"]} if ok else None,
                         "selected_id": slots[1] if ok else None, "seconds": 0.5 + order, "recovered": False})
    return rows


def ja_scores() -> dict:
    return {"model": "clip", "revision": "r1", "scores": {c: k / 10 for k, c in enumerate(c for p in PIDS for c in cids(p))}}


def table_pools() -> list[dict]:
    return [
        {"prompt_id": pid, "prompt": f"A market scene {i}", "country": "Peru", "candidate_id": cid,
         "source_model": cid[-2:], "alignment": (i + j) % 3 / 2, "stereotype": 0.5, "n": 2,
         "image_path": f"img/{cid}.png" if i == 0 else None, "item_culture": ["east", "west"][j % 2]}
        for i, pid in enumerate(PIDS) for j, cid in enumerate(cids(pid))
    ]


def table_votes() -> list[dict]:
    """Rubric votes (1-5) of two pools, whose consensus is derived from them."""
    return [
        {"candidate_id": cid, "outcome": "rubric", "pool": pool, "annotator": f"{pool}{k}", "value": 1 + (j + k) % 5}
        for j, cid in enumerate(c for p in PIDS for c in cids(p)) for pool in ("a", "b") for k in range(2)
    ]


def table_ratings() -> list[dict]:
    statuses = ["ok", "ok", "abstained", "parse_fail", "runtime_fail"]
    return [
        {"candidate_id": cid, "condition": ["default", "persona"][j % 2], "status": statuses[j % 5],
         "rating": 1 + j % 5 if statuses[j % 5] == "ok" else None, "raw_output": f"{1 + j % 5}", "attempts": 1,
         "seconds": 0.5, "parse_note": "strict"}
        for j, cid in enumerate(c for p in PIDS for c in cids(p))
    ]


def table_decisions() -> list[dict]:
    return [
        {"prompt_id": pid, "order_index": order, "slot_candidate_ids": cids(pid)[order:] + cids(pid)[:order],
         "choice_label": "A", "raw_output": "A", "attempts": 1, "seconds": 0.25, "ranking": ["A", "C", "B"]}
        for pid in PIDS for order in (0, 1)
    ]


def table_labels() -> list[dict]:
    """Gold labels of the default taxonomy: gender and profession of every candidate."""
    return [{"candidate_id": c, "attribute": attribute, "label": labels[k % len(labels)]}
            for k, c in enumerate(c for p in PIDS for c in cids(p))
            for attribute, labels in (("gender", ["male", "female"]), ("profession", ["doctor", "nurse", "teacher"]))]


def table_labeler() -> list[dict]:
    """An attribute judge's answers: a label, the abstention label, a label off the taxonomy, an empty field."""
    answers = ["male", "unspecified", "Female", None]
    return [{"candidate_id": c, "attribute": "gender", "label": answers[k % 4], "rationale": "short hair",
             "condition": ["default", "no_label_list"][k % 2]} for k, c in enumerate(c for p in PIDS for c in cids(p))]


def table_scores() -> list[dict]:
    return [{"candidate_id": c, "score": k / 10} for k, c in enumerate(c for p in PIDS for c in cids(p))]


def cf_records() -> list[dict]:
    return [
        {"id": pid, "prompt": f"A market scene {i}", "country": "Peru", "category": "food", "model_name": model,
         "human_annotations": [
             {"annotator_id": f"a{k}", "prompt_alignment": {"score": (i + j + k) % 3 / 2, "missing_explicit": k == 1,
                                                            "missing_implicit": []},
              "stereotype": {"is_stereotypical": False}, "image_quality": {"score": 0.5}, "overall_score": 3}
             for k in range(2)]}
        for i, pid in enumerate(PIDS[:2]) for j, model in enumerate(MODELS)
    ]


def cf_images() -> list[dict]:
    return [
        {"id": f"{pid}_{model}", "image": {"bytes": png(3 * i + j), "path": None},
         "prompt": f"A market scene {i}", "country": "Peru", "model": model}
        for i, pid in enumerate(PIDS[:2]) for j, model in enumerate(MODELS)
    ]


# ---------------------------------------------------------------- serialising


def jsonl_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8", "surrogatepass")


def json_bytes(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8", "surrogatepass")


def csv_bytes(rows: list[dict]) -> bytes:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    for r in rows:
        writer.writerow(["" if r.get(c) is None else "|".join(map(str, r[c])) if isinstance(r[c], list) else str(r[c])
                         for c in columns])
    return out.getvalue().encode("utf-8", "surrogatepass")


def parquet_bytes(rows: list[dict]) -> bytes:
    """Rows as Parquet, one Arrow column per key (see `_arrow_column`)."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    out = io.BytesIO()
    pq.write_table(pa.table({c: _arrow_column([r.get(c) for r in rows]) for c in columns}), out)
    return out.getvalue()


def _arrow_column(column: list) -> pa.Array:
    """Text columns go in as raw bytes (a lone surrogate becomes a cell that is not UTF-8); a column
    whose values no single Arrow type holds keeps the first odd value and nulls the rest, else becomes text."""
    if all(v is None or isinstance(v, str) for v in column):
        raw = [None if v is None else v.encode("utf-8", "surrogatepass") for v in column]
        return pa.array(raw, pa.binary()).view(pa.string())
    odd = next((i for i, v in enumerate(column) if type(v) is not type(column[0])), 0)
    for attempt in (column, [v if i == odd else None for i, v in enumerate(column)]):
        try:
            return pa.array(attempt)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            continue
    return _arrow_column([None if v is None else str(v) for v in column])


# ---------------------------------------------------------------- damage


def damaged_bytes(data: st.DataObject, raw: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["truncate", "flip", "insert", "cut"]), label="byte damage")
    at = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="position")
    if kind == "truncate":
        return raw[:at]
    if kind == "flip":
        return raw[:at] + bytes([raw[at] ^ data.draw(st.integers(1, 255))]) + raw[at + 1:]
    if kind == "insert":
        piece = data.draw(st.one_of(st.sampled_from(INSERTS), st.binary(min_size=1, max_size=6)), label="inserted")
        return raw[:at] + piece + raw[at:]
    span = data.draw(st.integers(1, 40))
    return raw[:at] + raw[at + span:]


def odd_value(data: st.DataObject) -> object:
    return data.draw(
        st.one_of(st.sampled_from(ODD_VALUES), st.text(max_size=12), st.integers(), st.floats()), label="value"
    )


def damaged_records(data: st.DataObject, records: list) -> list:
    """Walk into a random record and swap, drop or duplicate what is found there (or repeat the record)."""
    records = json.loads(json.dumps(records))
    if data.draw(st.integers(0, 9), label="repeat a record") == 0:
        i = data.draw(st.integers(0, len(records) - 1))
        records.insert(data.draw(st.integers(0, len(records))), json.loads(json.dumps(records[i])))
        return records
    parent: list | dict = records[data.draw(st.integers(0, len(records) - 1), label="record")]
    key: int | str = data.draw(st.sampled_from(sorted(parent)), label="field")
    while isinstance(parent[key], (dict, list)) and parent[key] and data.draw(st.booleans(), label="deeper"):
        parent = parent[key]
        key = data.draw(st.sampled_from(sorted(parent) if isinstance(parent, dict) else range(len(parent))))
    action = data.draw(st.sampled_from(["swap", "swap", "drop", "same as another", "unknown key"]), label="action")
    if action == "drop":
        del parent[key]
    elif action == "same as another" and isinstance(key, str):
        other = data.draw(st.sampled_from([r for r in records if isinstance(r, dict) and key in r] or [parent]))
        parent[key] = other[key]
    elif action == "unknown key" and isinstance(parent[key], dict):
        parent[key]["surprise"] = odd_value(data)
    else:
        parent[key] = odd_value(data)
    return records


# ---------------------------------------------------------------- targets


@dataclass
class Target:
    """One input file to damage: its valid content, how to damage it, and the ingest command around it."""

    file: str  # path inside the world's folder
    valid: Callable[[], bytes]
    records: Callable[[], list] | None  # structure to damage, with its serialiser
    serialise: Callable[[list], bytes] | None
    argv: Callable[[Path, Path, Path], list[str]]  # (world folder, database, images folder) -> argv


def ja_argv(root: Path, db: Path, _images: Path) -> list[str]:
    return ["judgeacts", "--pools", str(root / "ja/data/derived/mini.jsonl"), "--run", f"j={root / 'ja/runs/j.jsonl'}",
            "--scores", f"clip={root / 'ja/scores.json'}", "--db", str(db), "--dataset", "ja"]


def table_argv(
    pools: str, decisions: str = "tb/decisions.csv", votes: str = "tb/votes.csv", ratings: str = "tb/ratings.csv",
    labels: str = "tb/labels.csv", labeler: str = "tb/labeler.jsonl",
) -> Callable[[Path, Path, Path], list[str]]:
    def argv(root: Path, db: Path, _images: Path) -> list[str]:
        return ["table", "--pools", str(root / pools), "--votes", str(root / votes),
                "--decisions", f"j={root / decisions}", "--scores", f"clip={root / 'tb/scores.csv'}",
                "--ratings", f"r={root / ratings}", "--labels", str(root / labels),
                "--labeler", f"l={root / labeler}", "--taxonomy", str(root / "tb/taxonomy.json"),
                "--db", str(db), "--dataset", "tb"]
    return argv


def cf_argv(root: Path, db: Path, images: Path) -> list[str]:
    return ["culturalframes", "--release", str(root / "cf"), "--db", str(db), "--dataset", "cf",
            "--images-dir", str(images)]


def _cf_shard(rows: list[dict]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


def _broken_image_rows(data: st.DataObject) -> list[dict]:
    rows = cf_images()
    row = rows[data.draw(st.integers(0, len(rows) - 1), label="image row")]
    row["image"]["bytes"] = damaged_bytes(data, row["image"]["bytes"]) or b"\x89"
    return rows


TARGETS: dict[str, Target] = {
    "judgeacts pools": Target("ja/data/derived/mini.jsonl", lambda: jsonl_bytes(ja_pools()), ja_pools, jsonl_bytes, ja_argv),
    "judgeacts run": Target("ja/runs/j.jsonl", lambda: jsonl_bytes(ja_run()), ja_run, jsonl_bytes, ja_argv),
    "judgeacts scores": Target("ja/scores.json", lambda: json_bytes(ja_scores()), lambda: [ja_scores()],
                               lambda r: json_bytes(r[0] if len(r) == 1 else r), ja_argv),
    "table pools csv": Target("tb/pools.csv", lambda: csv_bytes(table_pools()), table_pools, csv_bytes,
                              table_argv("tb/pools.csv")),
    "table pools jsonl": Target("tb/pools.jsonl", lambda: jsonl_bytes(table_pools()), table_pools, jsonl_bytes,
                                table_argv("tb/pools.jsonl")),
    "table pools parquet": Target("tb/pools.parquet", lambda: parquet_bytes(table_pools()), table_pools,
                                  parquet_bytes, table_argv("tb/pools.parquet")),
    "table decisions csv": Target("tb/decisions.csv", lambda: csv_bytes(table_decisions()), table_decisions,
                                  csv_bytes, table_argv("tb/pools.csv")),
    "table decisions jsonl": Target("tb/decisions.jsonl", lambda: jsonl_bytes(table_decisions()), table_decisions,
                                    jsonl_bytes, table_argv("tb/pools.csv", "tb/decisions.jsonl")),
    "table scores csv": Target("tb/scores.csv", lambda: csv_bytes(table_scores()), table_scores, csv_bytes,
                               table_argv("tb/pools.csv")),
    "table votes csv": Target("tb/votes.csv", lambda: csv_bytes(table_votes()), table_votes, csv_bytes,
                              table_argv("tb/pools.csv")),
    "table votes jsonl": Target("tb/votes.jsonl", lambda: jsonl_bytes(table_votes()), table_votes, jsonl_bytes,
                                table_argv("tb/pools.csv", votes="tb/votes.jsonl")),
    "table ratings csv": Target("tb/ratings.csv", lambda: csv_bytes(table_ratings()), table_ratings, csv_bytes,
                                table_argv("tb/pools.csv")),
    "table ratings jsonl": Target("tb/ratings.jsonl", lambda: jsonl_bytes(table_ratings()), table_ratings,
                                  jsonl_bytes, table_argv("tb/pools.csv", ratings="tb/ratings.jsonl")),
    "table labels csv": Target("tb/labels.csv", lambda: csv_bytes(table_labels()), table_labels, csv_bytes,
                               table_argv("tb/pools.csv")),
    "table labeler jsonl": Target("tb/labeler.jsonl", lambda: jsonl_bytes(table_labeler()), table_labeler,
                                  jsonl_bytes, table_argv("tb/pools.csv")),
    "table taxonomy": Target("tb/taxonomy.json", DEFAULT_TAXONOMY.read_bytes,
                             lambda: [json.loads(DEFAULT_TAXONOMY.read_text())],
                             lambda r: json_bytes(r[0] if len(r) == 1 else r), table_argv("tb/pools.csv")),
    "culturalframes annotations": Target(f"cf/{culturalframes.ANNOTATIONS_FILE}", lambda: json_bytes(cf_records()),
                                         cf_records, json_bytes, cf_argv),
    "culturalframes shard": Target("cf/data/train-0.parquet", lambda: _cf_shard(cf_images()), None, None, cf_argv),
}


def build_world(root: Path) -> Path:
    """Every target's valid file, plus the images they name."""
    for target in TARGETS.values():
        path = root / target.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(target.valid())
    for folder in (root / "ja/data/images", root / "tb/img"):
        folder.mkdir(parents=True, exist_ok=True)
        for k, cid in enumerate(cids("p0")):
            (folder / f"{cid}.png").write_bytes(png(k))
    (root / "outside.png").write_bytes(png(9))
    return root


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(folder with valid inputs, a database holding all of them ingested, its snapshot)."""
    root = build_world(tmp_path_factory.mktemp("fuzz"))
    db = root / "loaded.duckdb"
    for name in ("judgeacts pools", "table pools csv", "culturalframes shard"):
        code, err = run_main(TARGETS[name].argv(root, db, root / "images" / "loaded"))
        assert code == 0, err
    return root, db, snapshot(db)


def run_main(argv: list[str]) -> tuple[int, str]:
    """runners.ingest.main in-process; any exception escapes (and fails the test)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = ingest.main(argv)
    return code, err.getvalue()


def inputs(argv: list[str]) -> list[str]:
    """The files and folders a command reads (the values of its options, NAME= removed)."""
    values = [a.partition("=")[2] or a for a in argv[2::2] if not a.startswith("--")]
    return [v for v in values if v not in argv[argv.index("--db") + 1 : argv.index("--db") + 2]]


@pytest.mark.parametrize("name", sorted(TARGETS))
@FUZZ
@given(data=st.data())
def test_damaged_input_is_ingested_or_refused_cleanly(name, world, data):
    check_damaged_input(name, world, data)


def check_damaged_input(name: str, world: tuple[Path, Path, dict], data: st.DataObject) -> tuple[int, str]:
    """Damage target `name`'s file, ingest, assert the outcome is clean; returns (exit status, stderr)."""
    root, loaded, loaded_content = world
    target = TARGETS[name]
    path = root / target.file
    valid = target.valid()
    if name == "culturalframes shard" and data.draw(st.booleans(), label="break an image"):
        damaged = _cf_shard(_broken_image_rows(data))
    elif target.records is not None and data.draw(st.booleans(), label="damage the structure"):
        damaged = target.serialise(damaged_records(data, target.records()))
    else:
        damaged = damaged_bytes(data, valid)
    path.write_bytes(damaged)
    # an existing store (whose content no input here may change: equal content is "unchanged",
    # different content is refused without --replace) or a path where no database exists yet
    fresh = data.draw(st.booleans(), label="new database")
    db = root / "new" / "deeper" / "store.duckdb" if fresh else loaded
    images = root / "images" / "fuzzed"
    argv = target.argv(root, db, images)
    try:
        code, err = run_main(argv)
        assert code in (0, 2), err
        if code == 2:
            assert err.startswith("error: ") and any(f in err for f in inputs(argv)), err
            assert not (root / "new").exists(), list((root / "new").rglob("*"))
            assert not images.exists() or not any(images.iterdir())
        if not fresh:
            assert snapshot(loaded) == loaded_content
    finally:
        path.write_bytes(valid)
        shutil.rmtree(root / "new", ignore_errors=True)
        shutil.rmtree(images, ignore_errors=True)
    return code, err


# ---------------------------------------------------------------- special files

# inputs beyond TARGETS that a path reads: the images its pools name
SPECIAL_INPUTS: dict[str, tuple[str, Callable[[Path, Path, Path], list[str]]]] = {
    **{name: (target.file, target.argv) for name, target in TARGETS.items()},
    "judgeacts image": ("ja/data/images/p0_m0.png", ja_argv),
    "table image": ("tb/img/p0_m0.png", table_argv("tb/pools.csv")),
}
SPECIAL_KINDS = {"fifo": "a FIFO", "directory": "a directory", "/dev/zero": "a character device",
                 "/dev/urandom": "a character device"}
SPECIAL_CASES = [(name, kind, linked) for name in sorted(SPECIAL_INPUTS) for kind in SPECIAL_KINDS
                 for linked in (False, True)
                 # a device given directly is an argument, so only for inputs named on the command line
                 if linked or not kind.startswith("/dev/") or not SPECIAL_INPUTS[name][0].startswith("cf/")
                 and "image" not in name]


def remove_special(path: Path) -> None:
    for entry in (path, path.with_name(path.name + ".target")):
        if entry.is_dir() and not entry.is_symlink():
            entry.rmdir()
        elif entry.exists() or entry.is_symlink():
            entry.unlink()


@pytest.mark.parametrize("name, kind, linked", SPECIAL_CASES)
def test_a_special_file_as_any_input_is_refused_at_once(name, kind, linked, world):
    """A FIFO, /dev/zero, /dev/urandom or a directory (or a symlink to one) as any input: one line naming it,
    exit 2, database unchanged; run in a child with a deadline, so a read that blocks or never ends fails."""
    root, loaded, loaded_content = world
    file, make_argv = SPECIAL_INPUTS[name]
    path = root / file
    valid = path.read_bytes()
    path.unlink()
    try:
        given = make_special(path, kind, linked)
        argv = [a.replace(str(path), str(given)) for a in make_argv(root, loaded, root / "images" / "special")]
        code, err = run_isolated("runners.ingest", argv, timeout=30)
    finally:
        remove_special(path)
        path.write_bytes(valid)
    line = error_line(err)
    if "image" in name and linked and kind.startswith("/dev/"):  # the link leads out of the dataset's folder
        assert code == 2 and f"{path.name}' leads outside the dataset's folder" in line, err
    else:  # an image path is named resolved, as the check that it stays in the folder resolves it
        named = path.with_name(path.name + ".target") if "image" in name and linked else given
        assert code == 2 and f"{named}: not a regular file ({SPECIAL_KINDS[kind]})" in line, err
    assert snapshot(loaded) == loaded_content


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "file"])
@pytest.mark.parametrize("flag", ["--release", "--images"])
def test_a_folder_input_that_is_not_a_folder_is_refused(flag, kind, world, tmp_path):
    root, loaded, loaded_content = world
    given = Path(kind) if kind.startswith("/dev/") else tmp_path / "folder"
    if kind == "fifo":
        os.mkfifo(given)
    elif kind == "file":
        given.write_bytes(b"not a folder")
    if flag == "--release":
        argv = ["culturalframes", "--release", str(given), "--images-dir", str(tmp_path / "images"),
                "--db", str(loaded), "--dataset", "cf"]
    else:
        argv = [*ja_argv(root, loaded, tmp_path), "--images", str(given)]
    code, err = run_isolated("runners.ingest", argv, timeout=30)
    assert code == 2 and f"error: {given}: not a folder" in error_line(err), err
    assert snapshot(loaded) == loaded_content


# ---------------------------------------------------------------- wide headers and huge values

WIDE = 100_000


@pytest.mark.parametrize("repeated", [False, True])
def test_a_header_of_100000_columns_is_refused_naming_one(repeated, world, tmp_path):
    """100,000 columns, all unknown or the last repeating the first: refused naming the column. The checks are
    linear in the header's width; the child's deadline only catches a check that is not (a quadratic
    one takes minutes here), it is no speed target."""
    root, loaded, loaded_content = world
    header = [f"c{i}" for i in range(WIDE - 1)] + ["c0" if repeated else "last"]
    pools = tmp_path / "wide.csv"
    pools.write_text(",".join(header) + "\n" + ",".join("1" for _ in header) + "\n")
    code, err = run_isolated("runners.ingest", ["table", "--pools", str(pools), "--db", str(loaded), "--dataset", "w"],
                             timeout=60)
    line = error_line(err)
    expected = "line 1, field 'c0': column appears twice" if repeated else "line 2, field 'c0': unknown column"
    assert code == 2 and f"{pools} {expected}" in line and len(err) < 4000, err
    assert snapshot(loaded) == loaded_content


HUGE = "x" * 5_000_000


def _huge_records(name: str) -> list:
    """Target `name`'s records with a 5 MB value where the ingest must refuse it (and quote it)."""
    records = TARGETS[name].records()
    if name == "table pools jsonl":  # a prompt that disagrees with the prompt's first row
        records[1]["prompt"] = HUGE
    elif name == "table decisions jsonl":
        records[0]["status"] = HUGE
    elif name == "table votes jsonl":
        records[0]["outcome"] = HUGE
    elif name == "table ratings jsonl":
        records[1] = dict(records[0], condition=records[0]["condition"])  # a duplicate call...
        records[0]["candidate_id"] = records[1]["candidate_id"] = HUGE  # ...of an unknown candidate
    elif name == "table labeler jsonl":
        records[0]["attribute"] = HUGE
    elif name == "judgeacts pools":
        records[1]["prompt_id"] = records[0]["prompt_id"] = HUGE
    elif name == "judgeacts run":
        records[0]["parsed"]["choice"] = HUGE
    elif name == "culturalframes annotations":
        for annotation in records[0]["human_annotations"]:
            annotation["annotator_id"] = HUGE
    return records


HUGE_TARGETS = ["table pools jsonl", "table decisions jsonl", "table votes jsonl", "table ratings jsonl",
                "table labeler jsonl", "judgeacts pools", "judgeacts run", "culturalframes annotations"]
HUGE_ARGV = {"table decisions jsonl": table_argv("tb/pools.csv", "tb/decisions.jsonl"),
             "table votes jsonl": table_argv("tb/pools.csv", votes="tb/votes.jsonl"),
             "table ratings jsonl": table_argv("tb/pools.csv", ratings="tb/ratings.jsonl")}


@pytest.mark.parametrize("name", HUGE_TARGETS)
def test_a_huge_value_is_quoted_as_a_short_marked_excerpt(name, world):
    """An invalid row holding a 5 MB value: the error quotes its first characters and how many more there were."""
    root, loaded, loaded_content = world
    target = TARGETS[name]
    path = root / target.file
    path.write_bytes(target.serialise(_huge_records(name)))
    try:
        code, err = run_main(HUGE_ARGV.get(name, target.argv)(root, loaded, root / "images" / "huge"))
    finally:
        path.write_bytes(target.valid())
    line = error_line(err)
    assert code == 2 and str(path) in line and "more characters)" in line and len(err) < 4000, err
    assert snapshot(loaded) == loaded_content


@pytest.mark.parametrize("where", ["header", "key"])
def test_a_huge_column_or_key_name_is_quoted_as_an_excerpt(where, world, tmp_path):
    root, loaded, loaded_content = world
    if where == "header":
        pools = tmp_path / "pools.csv"
        pools.write_text(f"prompt_id,prompt,candidate_id,{HUGE[:100_000]}\np,text,c,1\n")  # the csv module's cell limit
    else:
        pools = tmp_path / "pools.jsonl"
        pools.write_text(f'{{"prompt_id": "p", "{HUGE}": 1, "{HUGE}": 2}}\n')
    code, err = run_main(["table", "--pools", str(pools), "--db", str(loaded), "--dataset", "h"])
    assert code == 2 and "more characters)" in error_line(err) and len(err) < 4000, err
    assert snapshot(loaded) == loaded_content


# ---------------------------------------------------------------- blank names

blank_names = st.text(alphabet=st.sampled_from(BLANK_CHARACTERS), max_size=5)
BLANK_FLAGS = {  # flag -> (target whose command carries it, how the blank name replaces its value)
    "--dataset": ("table pools csv", lambda value, blank: blank),
    "--decisions": ("table pools csv", lambda value, blank: f"{blank}={value.partition('=')[2]}"),
    "--scores": ("table pools csv", lambda value, blank: f"{blank}={value.partition('=')[2]}"),
    "--ratings": ("table pools csv", lambda value, blank: f"{blank}={value.partition('=')[2]}"),
    "--labeler": ("table pools csv", lambda value, blank: f"{blank}={value.partition('=')[2]}"),
    "--run": ("judgeacts pools", lambda value, blank: f"{blank}={value.partition('=')[2]}"),
    "--dataset ": ("culturalframes annotations", lambda value, blank: blank),  # culturalframes' own --dataset
}
BLANK_NAMES = {  # target -> (record index, key path, field named in the error)
    "table pools jsonl": [(0, ("pool",), "pool"), (1, ("candidate_id",), "candidate_id")],
    "table votes jsonl": [(0, ("annotator",), "annotator"), (1, ("pool",), "pool"), (2, ("outcome",), "outcome")],
    "table ratings jsonl": [(0, ("condition",), "condition")],
    "table labeler jsonl": [(0, ("condition",), "condition")],
    "table decisions jsonl": [(0, ("prompt_id",), "prompt_id")],
    "judgeacts pools": [(0, ("prompt_id",), "prompt_id"), (1, ("candidates", 0, "id"), "candidates[0].id")],
    "culturalframes annotations": [(0, ("human_annotations", 0, "annotator_id"), "human_annotations[0].annotator_id"),
                                   (1, ("model_name",), "model_name"), (2, ("id",), "id")],
}
BLANK_FIELD_CASES = [(name, i) for name in BLANK_NAMES for i in range(len(BLANK_NAMES[name]))]


@pytest.mark.parametrize("flag", sorted(BLANK_FLAGS))
@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blank=blank_names)
def test_a_blank_name_on_the_command_line_is_refused(flag, world, blank):
    root, loaded, loaded_content = world
    name, replaced = BLANK_FLAGS[flag]
    argv = TARGETS[name].argv(root, loaded, root / "images" / "blank")
    at = argv.index(flag.strip()) + 1
    argv[at] = replaced(argv[at], blank)
    code, err = run_main(argv)
    assert code == 2 and error_line(err) == f"error: field '{flag.strip()}': a name cannot be blank", err
    assert snapshot(loaded) == loaded_content


@pytest.mark.parametrize("name, case", BLANK_FIELD_CASES)
@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blank=blank_names)
def test_a_blank_name_in_a_file_is_refused_naming_the_field(name, case, world, blank):
    root, loaded, loaded_content = world
    index, keys, field = BLANK_NAMES[name][case]
    target = TARGETS[name]
    records = target.records()
    parent = records[index]
    for key in keys[:-1]:
        parent = parent[key]
    parent[keys[-1]] = blank
    path = root / target.file
    path.write_bytes(target.serialise(records))
    argv = {**HUGE_ARGV, "table labeler jsonl": table_argv("tb/pools.csv")}.get(name, target.argv)
    try:
        code, err = run_main(argv(root, loaded, root / "images" / "blank"))
    finally:
        path.write_bytes(target.valid())
    line = error_line(err)
    assert code == 2 and f"{path} line " in line and f"field '{field}': " in line, err
    assert "a name cannot be blank" in line or "missing" in line and blank == "", err  # an empty id is "missing"
    assert snapshot(loaded) == loaded_content
