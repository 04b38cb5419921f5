"""Studies for the judge-change tests: a built one where the unanimity gate splits two judges, and the
JudgeActs main split with its 8B extension run.

The built study (`gate_split`): P prompts of three candidates with distinct ratings on a 1/12 grid.
Every judge returns the best image in all three orders on the first half of the prompts (unanimous).
On the second half the orders disagree (best, middle and worst each once), and order 0 returns
the worst image for `small` (so the unanimity gate rejects its failures) and the best for `large`
(so it rejects good decisions); `small_copy` repeats `small`'s calls. Order k shows the canonical
candidates rotated by k (slot s holds candidate (s + k) mod 3).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from audit_core.selection.data import SelectionData
from runners import ingest
from tests.support.paths import JUDGEACTS_MAIN
from tests.support.tables import write_table

SPLIT_JUDGES = ("small", "large", "small_copy")


def gate_split(n: int = 60, seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(h (n, 3) alignment ratings, judge -> (n, 3) canonical picks per order) of the module docstring."""
    rng = np.random.default_rng(seed)
    h = np.array([rng.choice(13, size=3, replace=False) / 12 for _ in range(n)])
    best, worst = h.argmax(axis=1), h.argmin(axis=1)
    middle = 3 - best - worst
    unanimous = np.arange(n) < n // 2
    same = np.column_stack([best, best, best])
    small = np.where(unanimous[:, None], same, np.column_stack([worst, best, middle]))
    large = np.where(unanimous[:, None], same, np.column_stack([best, middle, worst]))
    return h, {"small": small, "large": large, "small_copy": small.copy()}


def write_gate_split(folder: Path, judges: tuple[str, ...] = SPLIT_JUDGES, n: int = 60,
                     shifted: bool = False) -> list[str]:
    """Write the study's pools and the `judges`' decisions as table-contract CSVs into `folder`; returns
    the `runners.ingest table` arguments that read them. `shifted` raises one rating by 1/12 (other pools)."""
    h, picks = gate_split(n)
    if shifted:
        h[0, h[0].argmin()] += 1 / 12
    ids = [[f"p{p:03d}_{c}" for c in "abc"] for p in range(n)]
    pools = [{"prompt_id": f"p{p:03d}", "prompt": f"prompt {p}", "country": f"c{p % 3}", "candidate_id": ids[p][c],
              "source_model": f"m{c}", "alignment": float(h[p, c])} for p in range(n) for c in range(3)]
    folder.mkdir(parents=True, exist_ok=True)
    args = ["table", "--pools", str(write_table(folder / "pools.csv", pools))]
    for judge in judges:
        calls = [{"prompt_id": f"p{p:03d}", "order_index": k, "slot_candidate_ids": [ids[p][(s + k) % 3] for s in range(3)],
                  "chosen_candidate_id": ids[p][picks[judge][p, k]]} for p in range(n) for k in range(3)]
        args += ["--decisions", f"{judge}={write_table(folder / f'{judge}.csv', calls)}"]
    return args


def ingest_gate_split(db: Path, dataset: str = "split", judges: tuple[str, ...] = SPLIT_JUDGES,
                      shifted: bool = False) -> Path:
    """`db` after `runners.ingest table` has read the built study (the command must succeed)."""
    args = write_gate_split(db.parent / f"{dataset}_tables", judges, shifted=shifted)
    assert ingest.main([*args, "--db", str(db), "--dataset", dataset]) == 0
    return db


def ingest_main_with_8b(db: Path) -> Path:
    """`db` after `runners.ingest judgeacts` has read the main split with the 4B (`qwen`), SmolVLM2 (`smol`)
    and 8B (`qwen8b`) runs and the CLIP scores, as dataset `main`."""
    runs = JUDGEACTS_MAIN / "runs"
    assert ingest.main([
        "judgeacts", "--pools", str(JUDGEACTS_MAIN / "data/derived/main.jsonl"),
        "--run", f"qwen={runs / 'qwen_main.jsonl'}", "--run", f"smol={runs / 'smol_main.jsonl'}",
        "--run", f"qwen8b={runs / 'extension/qwen8b_mlx_main.jsonl'}",
        "--scores", f"clip={JUDGEACTS_MAIN / 'results/main/clip_scores.json'}", "--db", str(db), "--dataset", "main",
    ]) == 0
    return db


def main_file_order() -> list[str]:
    """The main split's prompt ids in the order of its pools file (the study bootstraps in this order)."""
    lines = (JUDGEACTS_MAIN / "data/derived/main.jsonl").read_text().splitlines()
    return [json.loads(line)["prompt_id"] for line in lines if line.strip()]


def in_file_order(data: SelectionData, prompt_ids: list[str]) -> SelectionData:
    """The same dataset with its prompts in the order of `prompt_ids`."""
    row = dict(zip(data.prompts["prompt_id"], range(data.n_prompts)))
    r = np.array([row[p] for p in prompt_ids])
    return dataclasses.replace(
        data, prompts=data.prompts.iloc[r].reset_index(drop=True), candidate_ids=data.candidate_ids[r],
        source_models=data.source_models[r], mask=data.mask[r], outcomes={k: v[r] for k, v in data.outcomes.items()},
        picks={k: v[r] for k, v in data.picks.items()}, slots={k: v[r] for k, v in data.slots.items()},
        statuses={k: v[r] for k, v in data.statuses.items()}, scores={k: v[r] for k, v in data.scores.items()},
        vote_variance=None if data.vote_variance is None else data.vote_variance[r],
    )
