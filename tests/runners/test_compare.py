"""runners.compare: its files and columns, exit status 0/1/2, bad input refused with one line and the
database unchanged, two databases with the same pools, and the JudgeActs 4B → 8B change as printed.

The printed JudgeActs figures are compared with the published study (results/main/extension.json)
at the three decimals the command prints: point estimates exactly; interval bounds within 0.002,
since the store keeps prompts sorted by id while the study resamples them in its file's order (the
same seed then draws other resamples; measured difference at most 0.0011).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from runners import compare
from tests.support.judge_change import ingest_gate_split, ingest_main_with_8b
from tests.support.paths import JUDGEACTS_MAIN

COMPARE_COLUMNS = ["measure", "policy", "baseline", "candidate", "difference", "difference_lo", "difference_hi", "n"]
GATES_COLUMNS = ["gate", "judge", "coverage", "kept_gain", "kept_gain_lo", "kept_gain_hi", "rejected_gain",
                 "rejected_gain_lo", "rejected_gain_hi", "kept_minus_rejected", "kept_minus_rejected_lo",
                 "kept_minus_rejected_hi", "verdict"]


@pytest.fixture(scope="module")
def split_db(tmp_path_factory) -> Path:
    return ingest_gate_split(tmp_path_factory.mktemp("split") / "split.duckdb")


def run(db: Path, out: Path, baseline: str, candidate: str, *extra: str) -> int:
    return compare.main(["--db", str(db), "--dataset", "split", "--baseline", baseline, "--candidate", candidate,
                         "--out", str(out), "--resamples", "1000", *extra])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_files_and_columns_and_exit_0_when_every_check_holds(split_db, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run(split_db, out, "small", "small_copy") == 0
    printed = capsys.readouterr().out
    assert "checks: 4 of 4 hold (the default set)" in printed
    frame = pd.read_csv(out / "compare.csv")
    assert list(frame.columns) == COMPARE_COLUMNS
    assert (frame.loc[frame["n"] > 0, ["difference", "difference_lo", "difference_hi"]] == 0).all().all()
    gates = pd.read_csv(out / "gates.csv")
    assert list(gates.columns) == GATES_COLUMNS
    assert set(gates["gate"]) == {"orders>=2/3", "orders>=3/3", "judge(large)"}
    summary = json.loads((out / "compare.json").read_text())
    assert summary["baseline"] == {"judge": "small", "dataset": "split"}
    assert summary["resamples"] == 1000 and summary["seed"] == 0
    assert summary["rule"] == {"filters_rejected_lo_at_most": 0.0, "filters_kept_minus_rejected_lo_above": 0.0,
                               "discards_rejected_lo_above": 0.0}
    assert len(summary["differences"]) == len(frame) and len(summary["gates"]) == len(gates)
    assert all(c["holds"] for c in summary["checks"]) and not summary["checks_given"]


def test_default_checks_fail_when_a_gate_stops_filtering_each_failure_on_one_line(split_db, tmp_path, capsys) -> None:
    assert run(split_db, tmp_path / "out", "small", "large") == 1
    lines = capsys.readouterr().out.splitlines()
    failed = [line for line in lines if line.startswith("check failed: ")]
    assert [re.search(r'"(orders>=\d/3)"', line)[1] for line in failed] == ["orders>=2/3", "orders>=3/3"]
    assert failed[1] == ('check failed: verdict(baseline, "orders>=3/3") != "filters failures" or '
                         'verdict(candidate, "orders>=3/3") != "discards good decisions" '
                         '(verdict(baseline, "orders>=3/3") = "filters failures"; '
                         'verdict(candidate, "orders>=3/3") = "discards good decisions")')
    assert any(line.startswith("gate orders>=3/3, small: coverage 50%") and line.endswith(": filters failures")
               for line in lines)
    assert any(line.startswith("gate orders>=3/3, large: ") and line.endswith(": discards good decisions")
               for line in lines)
    gates = pd.read_csv(tmp_path / "out" / "gates.csv").set_index(["gate", "judge"])
    assert gates.loc[("orders>=3/3", "large"), "verdict"] == "discards good decisions"


def test_given_checks_and_rules_replace_the_defaults(split_db, tmp_path, capsys) -> None:
    code = run(split_db, tmp_path / "out", "small", "large",
               "--check", 'verdict(candidate, "small agree>=3/3") == "no evidence either way"',
               "--check", "difference_lo(gain, order0) > 0",
               "--rule", "discards_rejected_lo_above=1", "--no-standard-gates", "--gate", "large: orders>=3/3")
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "checks: 2 of 2 hold;" in printed
    assert pd.read_csv(tmp_path / "out" / "gates.csv")["gate"].tolist() == ["orders>=3/3", "orders>=3/3"]
    assert run(split_db, tmp_path / "out2", "small", "large", "--check", "n(gain, order0) < 40") == 1
    assert capsys.readouterr().out.count("check failed: n(gain, order0) < 40 (n(gain, order0) = 60)") == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--baseline", "nobody"], "baseline judge 'nobody' is not a selector judge of dataset 'split'"),
    (["--candidate", "nobody"], "candidate judge 'nobody' is not a selector judge"),
    (["--dataset", "missing"], "dataset 'missing' has no prompts (known: split)"),
    (["--check", "difference_lo(gain, order0) >> 0"], "check 'difference_lo(gain, order0) >> 0', character 30"),
    (["--check", 'verdict(candidate, "orders>=5/3") == "filters failures"'], "no gate 'orders>=5/3'"),
    (["--rule", "filters=1"], "rule 'filters=1': write NAME=VALUE"),
    (["--gate", "small: orders>=9/3"],
     "composed gate 'small: orders>=9/3', character 19: orders>=9/3: k must be between 1 and K"),
    (["--pool", "experts"], "no alignment ratings in pool 'experts'"),
])
def test_bad_input_exits_2_with_one_line_and_changes_nothing(split_db, tmp_path, capsys, args, message) -> None:
    before = digest(split_db)
    argv = {"--baseline": "small", "--candidate": "large", "--dataset": "split"}
    extra = []
    for flag, value in zip(args[::2], args[1::2]):
        if flag in argv:
            argv[flag] = value
        else:
            extra += [flag, value]
    out = tmp_path / "out"
    code = compare.main(["--db", str(split_db), "--out", str(out), "--resamples", "100",
                         *[x for kv in argv.items() for x in kv], *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert "Traceback" not in err
    assert digest(split_db) == before
    assert not out.exists()


def test_the_candidate_from_another_database_with_the_same_pools(split_db, tmp_path, capsys) -> None:
    other = ingest_gate_split(tmp_path / "other.duckdb", dataset="rerun", judges=("large",))
    assert run(split_db, tmp_path / "one", "small", "large", "--no-standard-gates", "--gate", "small: orders>=3/3") == 1
    two = ["--candidate-db", str(other), "--candidate-dataset", "rerun", "--no-standard-gates",
           "--gate", "small: orders>=3/3"]
    assert run(split_db, tmp_path / "two", "small", "large", *two) == 1
    assert (tmp_path / "one" / "compare.csv").read_text() == (tmp_path / "two" / "compare.csv").read_text()
    one, two = (pd.read_csv(tmp_path / folder / "gates.csv") for folder in ("one", "two"))
    assert two["judge"].tolist() == ["small", "large@candidate"]  # the baseline's dataset has a judge `large` too
    assert one.drop(columns="judge").equals(two.drop(columns="judge"))
    summary = json.loads((tmp_path / "two" / "compare.json").read_text())
    assert summary["candidate"] == {"judge": "large@candidate", "dataset": "rerun"}
    capsys.readouterr()
    shifted = ingest_gate_split(tmp_path / "shifted.duckdb", dataset="rerun", judges=("large",), shifted=True)
    before = digest(shifted)
    assert run(split_db, tmp_path / "three", "small", "large", "--candidate-db", str(shifted),
               "--candidate-dataset", "rerun") == 2
    err = capsys.readouterr().err
    assert "datasets 'split' and 'rerun' do not hold the same pools: candidate 'p000_" in err and err.count("\n") == 1
    assert digest(shifted) == before


# ------------------------------------------------------------ the published 4B → 8B change

PUBLISHED = {  # extension.json: (gain, lo, hi)
    ("qwen", "kept"): (0.14136822773186408, 0.110393709825528, 0.17254935720844808),
    ("qwen", "rejected"): (-0.029671011793916825, -0.056932805710738665, -0.002389238050900072),
    ("qwen8b", "kept"): (0.1184535412605588, 0.09222973521767382, 0.14460282651072123),
    ("qwen8b", "rejected"): (0.068260120585702, 0.035931443798449605, 0.09943071705426355),
    ("qwen", "differ"): (-0.038569223985890654, -0.07059096671075837, -0.007131696428571435),
    ("qwen8b", "differ"): (0.09846781305114638, 0.06972539131393296, 0.12681947200176363),
}
BOUND_TOL = 0.002
NUMBER = r"(-?\d+\.\d{3}) \[(-?\d+\.\d{3}), (-?\d+\.\d{3})\]"


def test_judgeacts_unanimity_gate_and_differing_picks_as_published(tmp_path, capsys) -> None:
    if not JUDGEACTS_MAIN.is_dir():
        pytest.skip(f"{JUDGEACTS_MAIN} is not available")
    db = ingest_main_with_8b(tmp_path / "ja.duckdb")
    capsys.readouterr()
    code = compare.main(["--db", str(db), "--dataset", "main", "--baseline", "qwen", "--candidate", "qwen8b",
                         "--out", str(tmp_path / "out"), "--no-standard-gates", "--gate", "qwen: orders>=3/3"])
    printed = capsys.readouterr().out
    assert code == 1  # the unanimity gate no longer filters the candidate's failures
    lines = {line.split(":")[0]: line for line in printed.splitlines()}
    for judge, coverage in (("qwen", "40%"), ("qwen8b", "57%")):
        line = lines[f"gate orders>=3/3, {judge}"]
        kept, rejected = (tuple(map(float, m)) for m in re.findall(rf"(?:kept|rejected) gain {NUMBER}", line))
        for side, got in (("kept", kept), ("rejected", rejected)):
            published = PUBLISHED[(judge, side)]
            assert got[0] == round(published[0], 3)
            assert got[1:] == pytest.approx(published[1:], abs=BOUND_TOL)
        assert f"coverage {coverage}" in line
    assert lines["gate orders>=3/3, qwen"].endswith(": filters failures")
    assert lines["gate orders>=3/3, qwen8b"].endswith(": discards good decisions")
    differ = next(line for line in printed.splitlines() if line.startswith("order-0 picks differ"))
    assert differ.startswith("order-0 picks differ on 126 of 300 prompts both judges picked")
    found = re.findall(rf"(qwen8b|qwen) {NUMBER}", differ)
    for judge, *values in found:
        published = PUBLISHED[(judge, "differ")]
        assert float(values[0]) == round(published[0], 3)
        assert tuple(map(float, values[1:])) == pytest.approx(published[1:], abs=BOUND_TOL)
    assert [f[0] for f in found] == ["qwen", "qwen8b"]
    assert "check failed: " in printed
