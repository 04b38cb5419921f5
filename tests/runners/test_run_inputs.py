"""The recording commands' own inputs: names and the files they read.

`run_judge`, `run_rater`, `run_labeler` and `score` refuse a blank name (whitespace,
zero-width or direction characters only) in --dataset, --judge/--scorer and
--condition, and a conditions file naming a blank condition; and a FIFO,
`/dev/zero`, `/dev/urandom` or a directory (directly or through a symlink) given as
the taxonomy, instruction, conditions or templates file: each in one error line,
exit 2, before anything is recorded (the database unchanged). The special files
run in a child with a deadline, so a read that blocks or never ends fails the test.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.isolated import run_isolated
from tests.support.labels import write_label_dataset
from tests.support.refusals import BLANK_CHARACTERS, error_line, make_special
from tests.support.snapshots import snapshot

blank_names = st.text(alphabet=st.sampled_from(BLANK_CHARACTERS), max_size=5)
COMMANDS = {  # module -> its arguments besides --db, and the flags naming something
    "runners.run_judge": (["--dataset", "tiny", "--judge", "j", "--backend", "simulated", "--model", "careful"],
                          ("--dataset", "--judge")),
    "runners.run_rater": (["--dataset", "tiny", "--judge", "r", "--backend", "simulated", "--model", "careful"],
                          ("--dataset", "--judge", "--condition")),
    "runners.run_labeler": (["--dataset", "tiny", "--judge", "l", "--backend", "simulated", "--model", "careful"],
                            ("--dataset", "--judge", "--condition")),
    "runners.score": (["--dataset", "tiny", "--scorer", "s", "--backend", "simulated", "--model", "clip-like"],
                      ("--dataset", "--scorer")),
}
NAME_CASES = [(module, flag) for module, (_, flags) in COMMANDS.items() for flag in flags]
FILE_CASES = {  # (module, flag) -> its extra arguments
    ("runners.run_rater", "--instruction"): [],
    ("runners.run_rater", "--conditions"): [],
    ("runners.run_labeler", "--instruction"): [],
    ("runners.run_labeler", "--conditions"): [],
    ("runners.run_labeler", "--taxonomy"): [],
    ("runners.score", "--taxonomy"): ["--task", "labels"],
    ("runners.score", "--templates"): ["--task", "labels"],
}
SPECIAL = {"fifo": "a FIFO", "directory": "a directory", "/dev/zero": "a character device",
           "/dev/urandom": "a character device"}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A database holding dataset 'tiny' with gold labels, and its snapshot."""
    folder = tmp_path_factory.mktemp("run_inputs")
    db = folder / "store.duckdb"
    write_label_dataset(db, folder / "images")
    return db, snapshot(db)


def run_main(module: str, argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = importlib.import_module(module).main(argv)
    return code, err.getvalue()


def with_value(argv: list[str], flag: str, value: str) -> list[str]:
    """`argv` with `flag` given `value` (replaced, or added at the end)."""
    if flag in argv:
        return [value if i and argv[i - 1] == flag else a for i, a in enumerate(argv)]
    return [*argv, flag, value]


@pytest.mark.parametrize("module, flag", NAME_CASES)
@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blank=blank_names)
def test_a_blank_name_is_refused_before_anything_runs(module, flag, blank, loaded):
    db, content = loaded
    args, _ = COMMANDS[module]
    code, err = run_main(module, ["--db", str(db), *with_value(args, flag, blank), "--quiet"])
    assert code == 2 and error_line(err) == f"error: field '{flag}': a name cannot be blank", err
    assert snapshot(db) == content


@pytest.mark.parametrize("module", ["runners.run_rater", "runners.run_labeler"])
@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])
@given(blank=blank_names)
def test_a_blank_condition_in_a_conditions_file_is_refused(module, blank, loaded, tmp_path_factory):
    db, content = loaded
    conditions = tmp_path_factory.mktemp("conditions") / "conditions.json"
    conditions.write_text(json.dumps({"conditions": {"default": {}, blank: {}}}, indent=1))
    args, _ = COMMANDS[module]
    code, err = run_main(module, ["--db", str(db), *args, "--conditions", str(conditions), "--quiet"])
    line = error_line(err)
    assert code == 2 and f"{conditions} line 4, field 'conditions': a name cannot be blank" in line, err
    assert snapshot(db) == content


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("kind", sorted(SPECIAL))
@pytest.mark.parametrize("module, flag", sorted(FILE_CASES))
def test_a_special_file_as_a_config_file_is_refused_at_once(module, flag, kind, linked, loaded, tmp_path):
    db, content = loaded
    given_path = make_special(tmp_path / "input.json", kind, linked)
    args, _ = COMMANDS[module]
    argv = ["--db", str(db), *args, *FILE_CASES[module, flag], flag, str(given_path), "--quiet"]
    if module == "runners.score":
        argv = with_value(argv, "--backend", "clip")
    code, err = run_isolated(module, argv, timeout=30)
    assert code == 2 and f"error: {given_path}: not a regular file ({SPECIAL[kind]})" in error_line(err), err
    assert snapshot(db) == content
