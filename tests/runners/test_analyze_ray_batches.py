"""`runners.analyze_ray` without a cluster: a worker's Parquet partition, reduced a chunk at a time, adds
up to the local engine's sums (the Ray engine test runs the whole audit on a Ray head)."""

from __future__ import annotations

import pickle

from audit_core.selection import audit, partials, slices
from audit_core.selection.policy_rows import SIDE_OUTCOMES
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import ERROR_OUTCOMES
from runners import analyze_ray
from tests.support.frames import assert_frames_close
from tests.support.selection_data import random_data


def test_partitions_reduced_in_chunks_add_up_to_the_local_sums(monkeypatch, tmp_path):
    """Two exported files, each of several chunks of 64 prompts: their Partials added equal the
    local engine's within partials.SUM_TOLERANCE (float32 sums within a chunk), the prompts counted once."""
    data = random_data(1_000, judges=("a", "b"))
    parts, _ = slices.partitions(data)
    everything = audit.evaluated_policies(data)
    resampling = Resampling(150, 7)
    outcomes = [o for o in (*ERROR_OUTCOMES, *SIDE_OUTCOMES) if o in data.outcomes]
    layout = partials.layout_of(everything, outcomes, parts, resampling)
    monkeypatch.setattr(partials, "CHUNK_PROMPTS", 64)
    chunks = []
    monkeypatch.setattr(analyze_ray, "chunk_partials",
                        lambda *args: chunks.append(len(args[1])) or partials.chunk_partials(*args))
    files = analyze_ray.export_columns(layout, data, everything, parts, tmp_path, partitions=2)
    total = None
    for path in files:
        part = pickle.loads(analyze_ray.partition_partials({"path": str(path)}, layout)["partials"])
        total = part if total is None else total + part
    assert len(files) == 2 and len(chunks) == 16 and max(chunks) == 64 and sum(chunks) == data.n_prompts
    assert total.prompts == data.n_prompts
    local = partials.local_partials(layout, data, everything, parts)
    for left, right in zip(partials.policy_frames(layout, local), partials.policy_frames(layout, total)):
        assert_frames_close(left, right, partials.SUM_TOLERANCE)
