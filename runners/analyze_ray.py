"""The selection audit's partial sums on a Ray cluster: the engine behind `runners.analyze --engine ray`.

Above `poisson.POISSON_ABOVE` prompts every policy and slice mean of the selection audit is a ratio of
sums over prompts (`audit_core.selection.partials`). This engine writes the per-prompt columns those sums
need to Parquet partitions (`export_columns`: prompt id, the ratings of each candidate slot, each
deterministic policy's pick, each slice's value index; PARTITION_PROMPTS prompts a file). Ray Data runs
one task per file (`partition_partials`): the worker reads the file and reduces it to its `Partials`,
chunk_rows prompts at a time with `chunk_partials`, the function the local engine runs; the driver adds
the files' sums up one at a time, so it holds one file's sums, never the columns of the whole study.
One `Partials` a file, not one a chunk: each is resamples × statistics floats (tens of MB at 1,000
resamples), which would otherwise cross the object store once for every 4,096 prompts; and one task a
file, so the files are reduced side by side on as many workers (Ray Data's own Parquet reader puts
small files in one task). Only the files this audit wrote are read, whatever else the folder holds.
The policies themselves (the gates' and the debiased selectors' picks) and the other tables are made
by the driver from the store, as locally.

The Parquet files go to a temporary folder on this machine, removed afterwards, or to `folder` (kept):
on a cluster, a folder on storage every node reads at the same path. Which cluster: `$RAY_ADDRESS`
when set, else the cluster `ray start --head` started on this machine, else a new local instance that
ends with the audit; the `runners` and `audit_core` packages go to the workers (runtime_env py_modules).
Below the threshold there is nothing to distribute: the audit runs its fixed-n schemes in the driver.
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from audit_core.chunks import row_chunks
from audit_core.selection.data import SelectionData
from audit_core.selection.partials import DRAWN_KINDS, Layout, Partials, chunk_partials, chunk_rows
from audit_core.stats.poisson import prompt_keys
from runners.recording.ray_engine import ROOT, SHIPPED_PACKAGES, check_reachable

PARTITION_PROMPTS = 250_000  # prompts per Parquet file


def export_columns(layout: Layout, data: SelectionData, everything: Sequence, parts: Sequence, folder: Path,
                   partitions: int | None = None) -> list[Path]:
    """Write the per-prompt columns of the layout's sums as `partitions` Parquet files (default: one per
    PARTITION_PROMPTS prompts) into `folder`: prompt_id; `<outcome>/<slot>` ratings of alignment and the
    layout's outcomes (NaN where absent);
    `pick/<i>` the pick of layout.policies[i] (deterministic policies); `slice/<j>` the value index of
    slice j. Returns the files written."""
    n = data.n_prompts
    count = partitions or max(1, math.ceil(n / PARTITION_PROMPTS))
    index = {ref.name: i for i, ref in enumerate(layout.policies)}
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for k, rows in enumerate(np.array_split(np.arange(n), count)):
        columns = {"prompt_id": pa.array(data.prompts["prompt_id"].to_numpy()[rows].astype(str))}
        for outcome in ("alignment", *layout.outcomes):
            matrix = data.outcomes[outcome]
            columns.update({f"{outcome}/{j}": pa.array(matrix[rows, j]) for j in range(matrix.shape[1])})
        for ev in everything:
            if ev.kind not in DRAWN_KINDS:
                columns[f"pick/{index[ev.name]}"] = pa.array(ev.choice[rows].astype(np.int8))
        columns.update({f"slice/{j}": pa.array(p.codes[rows].astype(np.int32)) for j, p in enumerate(parts)})
        path = folder / f"part-{k:05d}.parquet"
        pq.write_table(pa.table(columns), path)
        written.append(path)
    return written


def columns_partials(columns: Mapping[str, np.ndarray], layout: Layout) -> Partials:
    """The Partials of exported columns (`export_columns`' names, numpy arrays): the sum of their chunks'
    `chunk_partials`, chunk_rows(layout.resampling) prompts each, in order."""
    slots: dict[str, int] = {}
    for column in columns:
        head, _, tail = column.partition("/")
        if tail and head not in ("pick", "slice"):
            slots[head] = max(slots.get(head, 0), int(tail) + 1)
    outcomes = {name: np.column_stack([columns[f"{name}/{j}"] for j in range(width)]).astype(float)
                for name, width in slots.items()}
    picks = {ref.name: columns[f"pick/{i}"].astype(np.int64) for i, ref in enumerate(layout.policies)
             if ref.kind not in DRAWN_KINDS}
    codes = [columns[f"slice/{j}"].astype(np.int64) for j in range(len(layout.slices))]
    keys = prompt_keys(columns["prompt_id"])
    total = None
    for rows in row_chunks(len(keys), chunk_rows(layout.resampling)):
        part = chunk_partials(layout, keys[rows], {name: v[rows] for name, v in outcomes.items()},
                              {name: v[rows] for name, v in picks.items()}, [code[rows] for code in codes])
        total = part if total is None else total + part
    return total


def partition_partials(row: dict[str, str], layout: Layout) -> dict[str, bytes]:
    """One Ray Data row {"path": a Parquet file of `export_columns`} -> {"partials": its pickled Partials}."""
    table = pq.read_table(row["path"])
    columns = {name: table[name].to_numpy() for name in table.column_names}
    return {"partials": pickle.dumps(columns_partials(columns, layout))}


def _connect() -> bool:
    """Join $RAY_ADDRESS, else this machine's cluster, else start a local instance; True when started here."""
    import ray

    options = {"runtime_env": {"py_modules": [str(ROOT / name) for name in SHIPPED_PACKAGES]},
               "logging_level": logging.WARNING}
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        check_reachable(os.environ["RAY_ADDRESS"])
        ray.init(**options)
        return False
    try:
        ray.init(address="auto", **options)
        return False
    except ConnectionError:
        ray.init(include_dashboard=False, **options)
        return True


def ray_reducer(folder: Path | None = None, partitions: int | None = None):
    """A `partials.Reducer` that makes the sums on a Ray cluster (module docstring); `folder` keeps the
    Parquet files there (shared storage for a cluster), `partitions` sets how many files."""

    def reduce(layout: Layout, data: SelectionData, everything: Sequence, parts: Sequence) -> Partials:
        import ray

        with tempfile.TemporaryDirectory(prefix="judge-audit-parquet-") as temporary:
            target = Path(folder) if folder is not None else Path(temporary)
            files = export_columns(layout, data, everything, parts, target, partitions)
            started = _connect()
            try:
                paths = ray.data.from_items([{"path": str(path)} for path in files], override_num_blocks=len(files))
                sums = paths.map(partition_partials, fn_kwargs={"layout": layout})
                total = None
                for row in sums.iter_rows():
                    part = pickle.loads(row["partials"])
                    total = part if total is None else total + part
            finally:
                if started:
                    ray.shutdown()
        return total

    return reduce
