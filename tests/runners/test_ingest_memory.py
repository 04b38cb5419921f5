"""`runners.ingest table` out of memory: one line, exit 2, the database as it was (or no new file).

The command runs in a child process whose address space is limited (RLIMIT_AS) to what it holds once
its modules are imported plus a margin far below what its input needs: a pools table of about 60 MB
read row by row (the whole CSV file is read at once) or in SQL (DuckDB stages it). Whichever
allocation fails first, Python's or DuckDB's, the command says so in one line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runners import ingest
from tests.support.paths import REPO
from tests.support.snapshots import snapshot
from tests.support.tables import pool_rows, write_table

CHILD = """
import resource, sys
import duckdb, numpy, pandas, pyarrow
from audit_core.ingest import staging
from runners import ingest
if sys.argv[1] == "rows":
    staging.FAST_PATH_MIN_BYTES = 1 << 62
held = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (held + int(sys.argv[2]), held + int(sys.argv[2])))
sys.exit(ingest.main(["table", "--pools", sys.argv[3], "--db", sys.argv[4], "--dataset", "big"]))
"""
MARGIN = 32 << 20  # bytes the child may add to its address space: less than the file it reads


@pytest.fixture(scope="module")
def big_pools(tmp_path_factory) -> Path:
    """A pools table of about 60 MB (200,000 candidates with long prompts)."""
    path = tmp_path_factory.mktemp("big") / "pools.csv"
    with path.open("w") as out:
        out.write("prompt_id,prompt,candidate_id,alignment\n")
        for i in range(50_000):
            prompt = f"scene {i} " + "x" * 280
            out.writelines(f"p{i},{prompt},p{i}_{k},0.5\n" for k in range(4))
    return path


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the address space size from /proc")
@pytest.mark.parametrize("way", ["rows", "sql"])
@pytest.mark.parametrize("existing", [True, False], ids=["existing store", "new store"])
def test_out_of_memory_is_one_line_and_changes_nothing(way, existing, big_pools, tmp_path):
    db = tmp_path / "store.duckdb"
    if existing:
        kept = write_table(tmp_path / "kept.csv", pool_rows())
        assert ingest.main(["table", "--pools", str(kept), "--db", str(db), "--dataset", "kept"]) == 0
    before = snapshot(db)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MALLOC_ARENA_MAX": "1"}  # one malloc arena: a steadier footprint
    done = subprocess.run([sys.executable, "-c", CHILD, way, str(MARGIN), str(big_pools), str(db)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: {ingest.OUT_OF_MEMORY}",
                                        "nothing was written: the database is unchanged"]
    assert snapshot(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["kept.csv", "store.duckdb"] if existing else [])
