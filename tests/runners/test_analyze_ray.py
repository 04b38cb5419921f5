"""`runners.analyze --engine ray`: a large study audited by Ray actors over Parquet partitions of the store,
the driver never loading it, writes the same tables as the local engine.

A Ray head alone in a fresh network namespace (only its loopback; usage stats off), started by the test
as the Ray run tests start theirs; the driver joins that namespace with `nsenter` and finds the head
through RAY_ADDRESS. The generated dataset (benchmarks.synthetic, 3 judges × 3 orders) is audited above
the Poisson threshold, which the driver lowers to 0 for this small set, split into 3 partitions in a kept
folder that already holds another file, which the engine must leave alone and not read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from audit_core.selection.partials import SUM_TOLERANCE
from benchmarks.synthetic import build_synthetic_db
from tests.support.frames import assert_frames_close
from tests.support.paths import REPO
from tests.support.ray_head import isolated_ray_head

DRIVER = textwrap.dedent("""
    import sys
    from audit_core.selection import audit
    from runners import analyze
    audit.POISSON_ABOVE = 0  # the test's small dataset counts as a large study
    sys.exit(analyze.main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def ray_head():
    """(head process id, environment for drivers): a Ray head alone in its own network namespace."""
    with isolated_ray_head({**os.environ, "PYTHONPATH": str(REPO)}, 200_000_000) as head:
        yield head


def test_ray_engine_writes_the_local_engines_tables(ray_head, tmp_path):
    """Every CSV table equal: text and counts exactly, means and interval endpoints within
    partials.SUM_TOLERANCE (float32 sums within a batch, added in another order)."""
    pid, env = ray_head
    local_db, ray_db = tmp_path / "local.duckdb", tmp_path / "ray.duckdb"
    build_synthetic_db(local_db, n_prompts=1_500, dataset_id="syn")
    shutil.copy(local_db, ray_db)  # a store each: the audit cache beside one must not answer for the other
    common = ["--dataset", "syn", "--resamples", "200", "--seed", "3"]
    local = subprocess.run([sys.executable, "-c", DRIVER, "--db", str(local_db), "--out", str(tmp_path / "local"),
                            *common], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert local.returncode == 0, local.stderr[-3000:]
    parquet = tmp_path / "parquet"
    parquet.mkdir()
    stale = parquet / "part-00009.parquet"  # a file an earlier run left in the kept folder: not this audit's
    pq.write_table(pa.table({"prompt_id": ["not-a-prompt"], "alignment/0": [99.0]}), stale)
    remote = subprocess.run(["nsenter", "-t", str(pid), "-n", sys.executable, "-c", DRIVER, "--db", str(ray_db),
                             "--out", str(tmp_path / "ray"), "--engine", "ray", "--partitions", "3",
                             "--parquet", str(parquet), *common],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert remote.returncode == 0, remote.stderr[-3000:]
    assert sorted(p.name for p in parquet.iterdir()) == sorted(["part-0000", "part-0001", "part-0002", stale.name])
    assert pq.read_table(stale).num_rows == 1
    tables = sorted(p.name for p in (tmp_path / "local").glob("*.csv"))
    assert tables == sorted(p.name for p in (tmp_path / "ray").glob("*.csv")) and "policies.csv" in tables
    for name in tables:
        assert_frames_close(pd.read_csv(tmp_path / "local" / name), pd.read_csv(tmp_path / "ray" / name),
                            SUM_TOLERANCE, name)
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["resamples"] == 200 and summary["seed"] == 3
