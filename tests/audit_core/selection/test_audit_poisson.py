"""The selection audit above poisson.POISSON_ABOVE prompts: its partial sums do not depend on row order or
chunking, its point estimates are the fixed-n path's, its intervals agree with the fixed-n path's, and it
runs in bounded memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from audit_core.selection import audit, partials, slices
from audit_core.selection.policy_rows import SIDE_OUTCOMES
from audit_core.stats.poisson import prompt_keys
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import ERROR_OUTCOMES
from tests.support.frames import assert_frames_close
from tests.support.paths import REPO
from tests.support.selection_data import random_data

JUDGES = ("a", "b", "c")


def _frames(data, everything, parts, resampling, order: np.ndarray, cuts: list[int]) -> tuple[pd.DataFrame, ...]:
    """policy_frames from the prompts taken in `order` and cut into chunks at `cuts`."""
    outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in data.outcomes]
    layout = partials.layout_of(everything, outcomes, parts, resampling)
    keys = prompt_keys(data.prompts["prompt_id"])
    total = None
    for rows in np.split(order, cuts):
        picks = {ev.name: ev.choice[rows] for ev in everything if ev.kind not in partials.DRAWN_KINDS}
        part = partials.chunk_partials(layout, keys[rows], {k: v[rows] for k, v in data.outcomes.items()}, picks,
                                       [p.codes[rows] for p in parts])
        total = part if total is None else total + part
    return partials.policy_frames(layout, total)


def test_sums_do_not_depend_on_row_order_or_chunking():
    """1, 3 and 7 chunks of uneven sizes and a shuffled order give the same tables: exactly in the counts and
    medians, within partials.SUM_TOLERANCE (float32 sums within a chunk) in every mean and interval."""
    data = random_data(1_500, judges=JUDGES)
    parts, _ = slices.partitions(data)
    everything = audit.evaluated_policies(data)
    resampling = Resampling(300, 11)
    n = data.n_prompts
    whole = _frames(data, everything, parts, resampling, np.arange(n), [])
    shuffled = np.random.default_rng(3).permutation(n)
    for order, cuts in ((np.arange(n), [100, 1_100]), (np.arange(n), [1, 2, 50, 400, 401, 1_000]),
                        (shuffled, [700]), (shuffled, [10, 20, 300, 900, 1_200, 1_499])):
        for left, right in zip(whole, _frames(data, everything, parts, resampling, order, cuts)):
            assert_frames_close(left, right, partials.SUM_TOLERANCE)


def test_point_estimates_equal_and_intervals_agree_with_the_fixed_n_path(monkeypatch):
    """Every point estimate equals the fixed-n path's (float64 sums in another order: 1e-12); the policies'
    interval endpoints agree within 0.35 standard errors of the mean at 2,000 resamples (each endpoint's
    Monte-Carlo noise is ~0.06 SE; the two bootstraps differ in how the acted-on count varies)."""
    data = random_data(3_000, judges=JUDGES)
    resampling = Resampling(2_000, 5)
    fixed = audit.audit_selection(data, resampling)
    monkeypatch.setattr(audit, "POISSON_ABOVE", 0)
    poisson = audit.audit_selection(data, resampling)
    for name, frame in fixed.tables().items():
        other = poisson.tables()[name]
        assert list(frame.columns) == list(other.columns), name
        points = [c for c in frame.columns if not c.endswith(("_lo", "_hi", "_lo_bonf", "_hi_bonf"))]
        assert_frames_close(frame[points], other[points], 1e-12)
    for stat in ("utility", "regret", "gain", "best", "bmr_delta"):
        se = (fixed.policies[f"{stat}_hi"] - fixed.policies[f"{stat}_lo"]) / (2 * 1.96)
        for end in ("lo", "hi"):
            gap = (fixed.policies[f"{stat}_{end}"] - poisson.policies[f"{stat}_{end}"]).abs()
            assert (gap <= 0.35 * se + 1e-12).all(), (stat, end, (gap / se).max())


BUDGET_MB = 500  # address space the audit may add to what the data took; the fixed-n path needs ~1,150 MB here
CHILD = textwrap.dedent("""
    import resource, sys
    from audit_core.selection import audit, slices
    from audit_core.stats.resampling import Resampling
    from tests.support.selection_data import random_data
    data = random_data(40_000, judges=("a", "b", "c"))
    parts, _ = slices.partitions(data)
    everything = audit.evaluated_policies(data)
    audit.POISSON_ABOVE = 0  # this dataset is above the threshold the test sets
    size = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[1]) * 2**20, resource.RLIM_INFINITY))
    table, _, frame = audit.evaluate_policies(data, everything, parts, Resampling(200))
    print(len(table), len(frame), int(table["n"].sum()))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_audit_above_the_threshold_runs_in_bounded_memory():
    """40,000 prompts, 3 judges, 200 resamples, in a child whose address space may grow by BUDGET_MB only
    once the data are made (one malloc arena and one BLAS thread, so that reserved address space is not
    counted as memory); the fixed-n path needed ~1,150 MB more at this size, and its need grows with n."""
    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(BUDGET_MB)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2_000:]
    policies, rows, acted = map(int, done.stdout.split())
    assert policies > 30 and rows > policies and acted > 0
