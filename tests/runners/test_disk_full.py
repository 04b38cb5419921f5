"""A full disk, for real: each command runs with its database or --out on a tiny tmpfs mounted in a
private mount namespace (`unshare -m`, as root; CI runs as root). It fails in one line, exit 2, no
traceback; an ingest leaves the database as it was; a recording run keeps every call it reported;
and once there is room (the tmpfs remounted larger) the same command finishes the job."""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from runners import analyze, demo, ingest
from runners.demo import attributes as demo_attributes
from runners.demo import ratings as demo_ratings
from tests.support.app import build_app_db
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset
from tests.support.snapshots import snapshot
from tests.support.tables import pool_rows, write_table

NO_SPACE = "cannot read or write (No space left on device)"


def _private_mounts() -> str | None:
    """Why a tmpfs cannot be mounted for these tests, or None when it can."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root (CI runs as root)"
    if shutil.which("unshare") is None:
        return "needs `unshare` (util-linux)"
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        return "`unshare -m` is not permitted here"
    return None


pytestmark = pytest.mark.skipif(_private_mounts() is not None, reason=str(_private_mounts()))


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


def on_full_disk(tmp_path: Path, kib: int, command: str, args: list[str], *, seed: list[Path] = (),
                 then_room: bool = False) -> tuple[Outcome, Outcome | None, Path]:
    """Run `python -m runners.<command> args` with `{disk}` in `args` a tmpfs of `kib` KiB holding copies
    of `seed`; with `then_room`, remount it at 256 MiB and run the same command again. Returns both
    outcomes and a folder holding, in `1/` (and `2/`), what the tmpfs held after each run (it vanishes
    with its namespace)."""
    disk, kept, logs = tmp_path / "disk", tmp_path / "kept", tmp_path / "logs"
    for folder in (disk, kept / "1", kept / "2", logs):
        folder.mkdir(parents=True)
    run = shlex.join([sys.executable, "-m", f"runners.{command}", *(a.replace("{disk}", str(disk)) for a in args)])
    steps = [f"mount -t tmpfs -o size={kib}k tmpfs {disk} || exit 90",
             *(f"cp {shlex.quote(str(path))} {disk}/" for path in seed),
             f"{run} >{logs}/1.out 2>{logs}/1.err; echo $? >{logs}/1.rc", f"cp -a {disk}/. {kept}/1/"]
    if then_room:
        steps += [f"mount -o remount,size=256m tmpfs {disk}", f"{run} >{logs}/2.out 2>{logs}/2.err; echo $? >{logs}/2.rc",
                  f"cp -a {disk}/. {kept}/2/"]
    done = subprocess.run(["unshare", "-m", "sh", "-c", "\n".join(steps)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr

    def outcome(n: int) -> Outcome:
        return Outcome(int((logs / f"{n}.rc").read_text()), (logs / f"{n}.out").read_text(),
                       (logs / f"{n}.err").read_text())

    return outcome(1), outcome(2) if then_room else None, kept


def one_error_line(err: str, *expected: str) -> str:
    """The only line of stderr (progress bars aside) that says `error:`; no traceback."""
    assert "Traceback" not in err, err
    errors = [line for line in re.split(r"[\r\n]", err) if line.startswith("error:")]
    assert len(errors) == 1, err
    for text in expected:
        assert text in errors[0], errors[0]
    return errors[0]


def test_ingest_on_a_full_disk_leaves_the_database_as_it_was(tmp_path) -> None:
    base = tmp_path / "base.duckdb"
    small = write_table(tmp_path / "small.csv", pool_rows())
    assert ingest.main(["table", "--pools", str(small), "--db", str(base), "--dataset", "small"]) == 0
    big = tmp_path / "big.csv"
    with big.open("w", newline="") as handle:  # about 4 MB more in the database than the disk has room for
        writer = csv.DictWriter(handle, ["prompt_id", "prompt", "country", "candidate_id", "source_model",
                                         "alignment", "n"])
        writer.writeheader()
        writer.writerows({"prompt_id": f"q{i}", "prompt": f"A market scene, variant {i}. " * 5, "country": "Japan",
                          "candidate_id": f"q{i}_{j}", "source_model": f"m{j}", "alignment": j / 2, "n": 3}
                         for i in range(4000) for j in range(3))
    kib = base.stat().st_size // 1024 + 1024
    first, _, kept = on_full_disk(tmp_path, kib, "ingest", ["table", "--pools", str(big), "--db", "{disk}/base.duckdb",
                                                            "--dataset", "big"], seed=[base])
    assert first.code == 2, first.stderr
    one_error_line(first.stderr, f"error: {tmp_path / 'disk' / 'base.duckdb'}", NO_SPACE)
    assert first.stderr.splitlines()[-1] == "nothing was written: the database is unchanged"
    assert snapshot(kept / "1" / "base.duckdb") == snapshot(base)


def test_a_recording_run_on_a_full_disk_keeps_every_reported_call_and_resumes(tmp_path) -> None:
    db = tmp_path / "k.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=40, pool_sizes=(3, 4))
    args = ["--db", "{disk}/k.duckdb", "--dataset", "tiny", "--judge", "weak", "--backend", "simulated",
            "--model", "weak", "--lenient"]
    first, again, kept = on_full_disk(tmp_path, db.stat().st_size // 1024 + 1000, "run_judge", args, seed=[db],
                                      then_room=True)
    assert first.code == 2, first.stderr
    one_error_line(first.stderr, f"error: {tmp_path / 'disk' / 'k.duckdb'}", NO_SPACE, "run the same command again")
    reported = max(int(n) for n in re.findall(r"\b(\d+)/120\b", first.stderr))  # the progress bar counts commits
    first_calls, final = calls_in(kept / "1" / "k.duckdb"), calls_in(kept / "2" / "k.duckdb")
    assert reported <= len(first_calls) < 120, (reported, len(first_calls))  # every reported call is there
    assert again.code == 0, again.stderr
    assert f"{120 - len(first_calls)} recorded now" in again.stdout
    assert f"{len(first_calls)} already recorded" in again.stdout
    assert len(final) == 120 and not final.duplicated(["prompt_id", "order_index"]).any()
    kept_calls = final.set_index("request_key").loc[first_calls["request_key"]]
    assert list(kept_calls["raw_output"]) == list(first_calls["raw_output"])
    assert list(kept_calls["run_id"]) == list(first_calls["run_id"])


def calls_in(db: Path):
    """Every selector call recorded in `db`."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT * FROM calls ORDER BY prompt_id, order_index").df()
    finally:
        con.close()


def test_demo_on_a_full_disk_is_one_line_and_the_same_command_finishes_it(tmp_path) -> None:
    args = ["--db", "{disk}/d.duckdb", "--prompts", "150", "--rating-prompts", "5", "--attribute-prompts", "5",
            "--quiet"]
    first, again, kept = on_full_disk(tmp_path, 2500, "demo", args, then_room=True)
    assert first.code == 2, first.stderr
    one_error_line(first.stderr, NO_SPACE, "the same command builds the rest")
    assert again.code == 0 and "SIMULATED demo built" in again.stdout, again.stderr
    db = kept / "2" / "d.duckdb"
    assert demo.is_built(db, 0, 150) and demo_ratings.is_built(db, 0, 5) and demo_attributes.is_built(db, 0, 5)


@pytest.mark.parametrize("command", ["analyze", "report"])
def test_an_out_folder_on_a_full_disk_is_one_line_and_holds_only_whole_files(tmp_path, command) -> None:
    db = build_app_db(tmp_path / "a.duckdb", tmp_path / "img", images=False)
    reference = tmp_path / "reference"
    assert analyze.main(["--db", str(db), "--dataset", "tiny", "--out", str(reference), "--resamples", "20"]) == 0
    args = ["--db", str(db), "--dataset", "tiny", "--out", "{disk}/out", "--resamples", "20",
            *(["--no-figures"] if command == "report" else [])]
    first, _, kept = on_full_disk(tmp_path, 64, command, args)
    assert first.code == 2, first.stderr
    line = one_error_line(first.stderr, NO_SPACE)
    files = sorted((kept / "1" / "out").iterdir())
    assert files and not [f for f in files if f.name.startswith(".")], files  # no partial file left behind
    for path in files:  # every file that is there is whole: the tables are the reference run's, byte for byte
        assert path.suffix in (".csv", ".json") and path.read_bytes() == (reference / path.name).read_bytes(), path
    failed = Path(line.removeprefix("error: ").split(": cannot read or write")[0])
    assert failed.parent == tmp_path / "disk" / "out" and not (kept / "1" / "out" / failed.name).exists()
