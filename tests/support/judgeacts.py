"""The published JudgeActs main split as the tests ingest it: the 4B (`qwen`) and SmolVLM2 (`smol`) runs
and the CLIP scores, as dataset `main`."""

from __future__ import annotations

from pathlib import Path

import pytest

from runners import ingest
from tests.support.paths import JUDGEACTS_MAIN


def ingest_main_split(db: Path) -> Path:
    """`db` after `runners.ingest judgeacts` has read the main split into it (the command must succeed); the
    test is skipped, saying why, where the shared JudgeActs files are absent."""
    if not JUDGEACTS_MAIN.is_dir():
        pytest.skip(f"{JUDGEACTS_MAIN} is not available")
    runs = JUDGEACTS_MAIN / "runs"
    assert ingest.main([
        "judgeacts", "--pools", str(JUDGEACTS_MAIN / "data/derived/main.jsonl"),
        "--run", f"qwen={runs / 'qwen_main.jsonl'}", "--run", f"smol={runs / 'smol_main.jsonl'}",
        "--scores", f"clip={JUDGEACTS_MAIN / 'results/main/clip_scores.json'}", "--db", str(db), "--dataset", "main",
    ]) == 0
    return db
