"""The open_clip scorer with a tiny randomly initialised model built from a config (no download)."""

import subprocess
import sys

import numpy as np

from audit_core import store
from runners.backends.clip import ClipScorer
from runners.score import run_scorer
from tests.support.clip import TINY
from tests.support.paths import REPO
from tests.support.pools import write_tiny_dataset


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
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "7 recorded now" in out.stdout
