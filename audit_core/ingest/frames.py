"""Pandas DataFrames shaped like the table contract, as a store to audit, with no database file of yours.

`store_from_frames` takes the same tables `runners.ingest table` takes from files (pools,
votes, gold labels, and per judge its decisions, scores, ratings or labels; a decision's
`label_probs` may be a dict or its JSON text) and returns an
in-memory DuckDB store that every loader reads. Each frame is written to Parquet in a private
temporary folder and read by the very readers the command uses, so every rule and message is
the command's; a message names the frame instead of a file (`pools frame line 3, field
'alignment': …`, lines counting rows from 1, as for Parquet files). The validated dataset is
written in one transaction to a store in that folder, copied into memory, and the folder removed.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import duckdb
import pandas as pd

from audit_core.attributes.taxonomy import DEFAULT_TAXONOMY, Taxonomy, load_taxonomy
from audit_core.errors import InputError
from audit_core.ingest import tables
from audit_core.ingest.staged_writes import write_staged_dataset
from audit_core.ingest.staging import Workspace
from audit_core.store import database

T = TypeVar("T")


def store_from_frames(
    pools: pd.DataFrame,
    *,
    dataset: str = "frames",
    votes: pd.DataFrame | None = None,
    decisions: Mapping[str, pd.DataFrame] | None = None,
    scores: Mapping[str, pd.DataFrame] | None = None,
    ratings: Mapping[str, pd.DataFrame] | None = None,
    rating_outcome: str = "rubric",
    labels: pd.DataFrame | None = None,
    labelers: Mapping[str, pd.DataFrame] | None = None,
    taxonomy: Taxonomy | None = None,
    outcomes: Mapping[str, tuple[float, float]] | None = None,
    images_dir: str | Path | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory store holding `dataset`, validated as `runners.ingest table` validates files.

    decisions, scores, ratings and labelers map a judge's name to its frame; `outcomes` declares
    outcomes of your own with their [lo, hi] (`--outcome NAME=LO:HI`); `taxonomy` defaults to the
    default taxonomy file (`--taxonomy`); image paths are relative to `images_dir` and stay inside
    it (no image paths without it). Raises InputError naming the frame, line and field.
    """
    declared = dict(outcomes or {})
    taxonomy = taxonomy or load_taxonomy(DEFAULT_TAXONOMY)
    with tempfile.TemporaryDirectory(prefix="judge-audit-frames-") as folder, contextlib.ExitStack() as staged:
        workspace = Workspace()
        staged.callback(workspace.close)
        written = _Frames(Path(folder))
        votes_file = written.path("votes", votes)
        labels_file = written.path("labels", labels)
        pool_set = written.read("pools", pools, lambda path: tables.read_pools_table(
            path, dataset, declared, votes=votes_file, images_dir=images_dir or folder, labels=labels_file,
            taxonomy=taxonomy, workspace=workspace))
        staged.callback(pool_set.close)
        scale = tables.rating_scale(rating_outcome, declared)
        readers = [
            *((f"decisions {name}", frame, lambda path, n=name: tables.read_decisions_table(path, n, workspace))
              for name, frame in (decisions or {}).items()),
            *((f"scores {name}", frame, lambda path, n=name: tables.read_scores_table(path, n, workspace))
              for name, frame in (scores or {}).items()),
            *((f"ratings {name}", frame,
               lambda path, n=name: tables.read_ratings_table(path, n, rating_outcome, scale, workspace))
              for name, frame in (ratings or {}).items()),
            *((f"labeler {name}", frame, lambda path, n=name: tables.read_labeler_table(path, n, taxonomy, workspace))
              for name, frame in (labelers or {}).items()),
        ]
        runs = []
        for role, frame, reader in readers:
            runs.append(written.read(role, frame, reader))
            staged.callback(runs[-1].close)
        db = Path(folder) / "frames.duckdb"
        written.located(lambda: write_staged_dataset(db, pool_set, runs))
        return _in_memory(db)


class _Frames:
    """Frames written as Parquet files in `folder`, and errors about those files told as about the frames."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: dict[str, str] = {}  # file path → "<role> frame"

    def path(self, role: str, frame: pd.DataFrame | None) -> Path | None:
        """The Parquet file holding `frame` (None for no frame); TypeError for what is not a DataFrame."""
        if frame is None:
            return None
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"the {role} table must be a pandas DataFrame, got {type(frame).__name__}")
        if "label_probs" in frame.columns:  # a dict per call is written as its JSON text, as a file holds it
            frame = frame.assign(label_probs=[json.dumps(v) if isinstance(v, dict) else v for v in frame["label_probs"]])
        path = self.folder / f"{len(self.names)}.parquet"
        frame.to_parquet(path, index=False)
        self.names[str(path)] = f"{role} frame"
        return path

    def read(self, role: str, frame: pd.DataFrame, reader: Callable[[Path], T]) -> T:
        """`reader` applied to `frame` written as Parquet."""
        path = self.path(role, frame)
        return self.located(lambda: reader(path))

    def located(self, step: Callable[[], T]) -> T:
        """`step()`, an InputError about one of the files re-raised about its frame."""
        try:
            return step()
        except InputError as err:
            message, file = err.message, err.file
            for path, name in self.names.items():
                message = message.replace(path, name)
                file = name if file == path else file
            raise InputError(message, file=file, line=err.line, field=err.field) from None


def _in_memory(db: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB database holding a copy of the store at `db`."""
    con = duckdb.connect(":memory:", config=dict(database.NO_EXTENSIONS))
    con.execute(f"ATTACH '{db}' AS frames_store (READ_ONLY)")  # a path this module made, not user text
    con.execute("COPY FROM DATABASE frames_store TO memory")
    con.execute("DETACH frames_store")
    return con
