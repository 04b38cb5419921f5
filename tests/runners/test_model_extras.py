"""Without the model extras (torch, transformers, open_clip), the hf and clip backends say what to
install: one line, exit status 2, nothing recorded — not a raw ModuleNotFoundError."""

from __future__ import annotations

import importlib.util

import pytest

from runners import run_judge, run_rater, score
from tests.support.pools import write_tiny_dataset
from tests.support.snapshots import snapshot

MISSING = {"torch", "transformers", "open_clip"}


@pytest.fixture
def without_extras(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name in MISSING else real(name, *a, **k))


@pytest.mark.parametrize("command, argv", [
    (run_judge.main, ["--judge", "j", "--backend", "hf", "--model", "Qwen/Qwen3-VL-4B-Instruct", "--orders", "1"]),
    (run_rater.main, ["--judge", "r", "--backend", "hf", "--model", "Qwen/Qwen3-VL-4B-Instruct"]),
    (score.main, ["--scorer", "clip", "--backend", "clip", "--model", "ViT-B-32"]),
])
def test_a_backend_without_its_extras_names_the_install_command(command, argv, without_extras, tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    write_tiny_dataset(db, tmp_path / "images")
    before = snapshot(db)
    assert command(["--db", str(db), "--dataset", "tiny", "--quiet", *argv]) == 2
    err = capsys.readouterr().err
    assert "requirements-models.txt" in err and "torch" in err and "Traceback" not in err
    assert snapshot(db) == before


def test_run_judge_help_lists_the_simulated_profiles(capsys):
    with pytest.raises(SystemExit):
        run_judge.main(["--help"])
    out = capsys.readouterr().out
    assert all(f"  {name}:" in out for name in ("slot_a", "strong", "weak"))
