"""The README's Python API example runs as written: on a demo database at data/demo.duckdb and
on pools.csv and calls.csv shaped as the README's `runners.ingest table` example reads them."""

from __future__ import annotations

import re

import pandas as pd

from runners.demo import build_demo
from tests.support.paths import REPO
from tests.support.tables import pool_rows, write_table


def python_blocks(markdown: str) -> list[str]:
    """The code of every ```python block, in order."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.M | re.S)


def test_the_python_api_example_runs(tmp_path, monkeypatch):
    blocks = python_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert blocks, "the README shows the Python API"
    (tmp_path / "data").mkdir()
    build_demo(tmp_path / "data" / "demo.duckdb", n_prompts=16, progress=False)
    write_table(tmp_path / "pools.csv", pool_rows())
    calls = [{"prompt_id": pid, "order_index": 0, "slot_candidate_ids": ids, "chosen_candidate_id": ids[-1]}
             for pid, ids in pd.DataFrame(pool_rows()).groupby("prompt_id")["candidate_id"].agg(list).items()]
    write_table(tmp_path / "calls.csv", calls)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    policies = namespace["result"].policies.set_index("policy")
    assert policies.loc["myjudge", "n"] == 3  # the last example audits the CSV judge on its three prompts
