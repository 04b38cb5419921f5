"""The open_clip scorer with a tiny randomly initialised model built from a config (no download)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch

from audit_core import store
from fixtures_pools import write_tiny_dataset
from runners.backends.clip import ClipScorer
from runners.score import run_scorer

ROOT = Path(__file__).resolve().parent.parent
TINY = "tiny-clip-test"
TINY_CONFIG = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16, "patch_size": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    config_dir = tmp_path_factory.mktemp("clip_configs")
    (config_dir / f"{TINY}.json").write_text(json.dumps(TINY_CONFIG))
    open_clip.add_model_config(config_dir)
    torch.manual_seed(0)
    model = open_clip.create_model(TINY, pretrained=None)
    checkpoint = config_dir / "tiny.pt"
    torch.save(model.state_dict(), checkpoint)
    return config_dir, checkpoint


def test_scores_are_cosines_per_image_alone(tiny_clip, tmp_path):
    _, checkpoint = tiny_clip
    pools = write_tiny_dataset(tmp_path / "c.duckdb", tmp_path / "images", n_prompts=1, pool_sizes=(4,))
    paths = list(pools.candidates["image_path"])
    scorer = ClipScorer(TINY, pretrained=str(checkpoint), device="cpu", batch_size=3)
    scores = scorer.score("a festival", paths)
    assert len(scores) == 4 and all(-1.0 <= s <= 1.0 for s in scores)
    # Order-blind and batch-blind: reversed pool, one image at a time, same numbers.
    assert np.allclose(scorer.score("a festival", paths[::-1]), scores[::-1], atol=1e-5)
    assert np.allclose([scorer.score("a festival", [p])[0] for p in paths], scores, atol=1e-5)
    assert scorer.model_revision().startswith(f"{TINY} checkpoint sha256:")


def test_run_scorer_records_a_scorer_run(tiny_clip, tmp_path):
    _, checkpoint = tiny_clip
    db = tmp_path / "c.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=3)
    con = store.connect(db)
    summary = run_scorer(con, dataset="tiny", scorer="clip-tiny",
                         backend=ClipScorer(TINY, pretrained=str(checkpoint), device="cpu"),
                         backend_name="clip", model=TINY, progress=False)
    scores = store.load_scores(con, "tiny")
    run = con.execute("SELECT kind, backend, model, model_revision FROM runs").fetchone()
    assert summary.recorded == len(scores) == len(store.load_candidates(con, "tiny"))
    assert run[:3] == ("scorer", "clip", TINY) and "sha256" in run[3]


def test_score_cli_writes_scores(tmp_path):
    db = tmp_path / "c.duckdb"
    write_tiny_dataset(db, tmp_path / "images", n_prompts=2)
    out = subprocess.run(
        [sys.executable, "-m", "runners.score", "--db", str(db), "--dataset", "tiny", "--scorer", "content",
         "--backend", "simulated", "--model", "content", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "7 recorded now" in out.stdout
