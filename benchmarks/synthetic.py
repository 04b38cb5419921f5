"""Generate a large, realistic audit dataset straight into a store, or as table-contract files (for benchmarks).

    python -m benchmarks.synthetic --db PATH --prompts N [--judges 3] [--orders 3] [--seed 0]
    python -m benchmarks.synthetic --tables DIR --prompts N [--formats parquet csv jsonl] [--judges 3] ...

Pools look like CulturalFrames: 10 countries x 5 categories, 3 or 4 candidates
from 4 generators, mean annotator ratings on a 1/12 grid, cultural-error rates as
shares of the 3 annotators (stereotype) or on sixths, image quality and overall
satisfaction: every rating on a grid, as real studies record them. Judges mix a
content signal with a slot prior (a slot-A lover, a nearly unbiased judge, a slot-B lover that sometimes
breaks the format, …) over `n_orders` cyclic rotations; an optional CLIP-like
scorer scores each image alone. Every table is built as whole columns and written
with `audit_core.store.insert_frame`: no Python loop per row.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from audit_core import store
from audit_core.store.records import utc_now

COUNTRIES = ("Brazil", "Canada", "Chile", "China", "Germany", "India", "Iran", "Japan", "Poland", "South_Africa")
CATEGORIES = ("dates-of-significance", "etiquette", "family", "greetings", "religion")
GENERATORS = ("SD35", "flux", "gpt-image", "imagegen3")  # sorted: canonical order = generator order
# (slot prior per slot A..D, content signal, parse-failure rate) per synthetic judge
JUDGE_STYLES = (
    ("slot_a", (1.2, 0.3, 0.1, 0.0), 2.5, 0.0),
    ("steady", (0.1, 0.0, 0.0, 0.0), 5.0, 0.0),
    ("slot_b", (0.6, 1.3, -0.5, -0.8), 1.0, 0.02),
)


def _list_column(values: np.ndarray, lengths: np.ndarray) -> pd.Series:
    """A VARCHAR[] column from flat values and per-row lengths (Arrow-backed, no per-row lists)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pd.Series(pd.arrays.ArrowExtensionArray(pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))))


def _strings(prefix: str, numbers: np.ndarray, width: int) -> np.ndarray:
    return np.char.add(prefix, np.char.zfill(numbers.astype(str), width)).astype(object)


def build_synthetic_db(
    path: str | Path,
    n_prompts: int = 100_000,
    n_judges: int = 3,
    n_orders: int = 3,
    seed: int = 0,
    scorer: bool = True,
    dataset_id: str | None = None,
) -> str:
    """Write a generated dataset into the store at `path`; returns its dataset id.

    Replaces a dataset of the same id. n_orders ≤ 3 (pools have 3 or 4 images).
    """
    dataset_id = dataset_id or f"synthetic-{n_prompts}"
    now = utc_now()
    frames = synthetic_frames(n_prompts, n_judges, n_orders, np.random.default_rng(seed), dataset_id, now, scorer=scorer)
    con = store.connect(path)
    try:
        with store.transaction(con):
            store.delete_dataset(con, dataset_id)
            store.insert_frame(con, "datasets", pd.DataFrame([{
                "dataset_id": dataset_id, "name": dataset_id, "source": "synthetic",
                "source_revision": f"seed={seed}", "manifest_sha256": "synthetic", "created_at": now,
                "notes": f"generated: {n_prompts} prompts, {n_judges} judges x {n_orders} orders",
            }]))
            for table in ("prompts", "candidates", "ratings", "runs"):
                store.insert_frame(con, table, frames[table])
            for frame in frames["calls"]:
                store.insert_frame(con, "calls", frame)
            for frame in frames["scores"]:
                store.insert_frame(con, "scores", frame)
    finally:
        con.close()
    return dataset_id


def synthetic_frames(
    n_prompts: int,
    n_judges: int,
    n_orders: int,
    rng: np.random.Generator,
    dataset_id: str,
    now: object,
    *,
    first: int = 0,
    scorer: bool = True,
) -> dict:
    """The store's frames of prompts `first` .. `first + n_prompts - 1` drawn from `rng`: prompts, candidates,
    ratings, runs, and lists of calls frames (one per judge) and scores frames (the scorer's, if any).

    A prompt's country and category follow its number, so a dataset drawn in ranges has the same mix.
    """
    if not 1 <= n_orders <= 3:
        raise ValueError("n_orders must be 1..3: the smallest pools have 3 images")
    if not 1 <= n_judges <= 26:
        raise ValueError("n_judges must be 1..26")
    width = len(GENERATORS)
    numbers = first + np.arange(n_prompts)
    # pools: 1/3 of prompts have 3 images (no imagegen3), like the JudgeActs main split
    m = np.where(rng.random(n_prompts) < 1 / 3, 3, 4)
    prompt_ids = _strings("p", numbers, 7)
    country = np.array(COUNTRIES, dtype=object)[numbers % len(COUNTRIES)]
    category = np.array(CATEGORIES, dtype=object)[(numbers // len(COUNTRIES)) % len(CATEGORIES)]
    prompts = pd.DataFrame({
        "dataset_id": dataset_id, "prompt_id": prompt_ids,
        "prompt": np.char.add("a culturally situated scene #", numbers.astype(str)).astype(object),
        "country": country, "category": category, "split": "synthetic",
    })
    mask = np.arange(width)[None, :] < m[:, None]
    rows, cols = np.nonzero(mask)
    cand_ids = np.char.add(np.char.add(prompt_ids[rows].astype(str), "_"), np.array(GENERATORS)[cols]).astype(object)
    candidates = pd.DataFrame({
        "dataset_id": dataset_id, "prompt_id": prompt_ids[rows], "candidate_id": cand_ids,
        "canonical_index": cols.astype(np.int32), "source_model": np.array(GENERATORS, dtype=object)[cols],
        "image_path": None,
    })

    # ratings: latent quality per image, generator effect, prompt difficulty
    generator_effect = np.array([0.0, -0.3, 0.6, 0.2])
    latent = rng.normal(size=(n_prompts, 1)) * 0.5 + generator_effect[None, :] + rng.normal(size=(n_prompts, width))
    alignment = np.round(12 / (1 + np.exp(-(latent + 0.9)))) / 12
    outcomes = {
        "alignment": alignment,
        # the share of an image's 3 annotators who flag a stereotype, as CulturalFrames records it
        "stereotype": rng.binomial(3, rng.beta(1, 7, size=latent.shape)) / 3,
        "missing_explicit": np.clip(np.round(6 * (1 - alignment) * rng.random(latent.shape)) / 6, 0, 1),
        "missing_implicit": np.clip(np.round(6 * (1 - alignment) * rng.random(latent.shape) * 0.7) / 6, 0, 1),
        "image_quality": np.clip(np.round(12 * (0.75 + 0.15 * rng.normal(size=latent.shape))) / 12, 0, 1),
        "overall": np.clip(np.round(16 * (0.6 * alignment + 0.3 + 0.1 * rng.normal(size=latent.shape))) / 16, 0, 1),
    }
    ratings = pd.concat(
        [pd.DataFrame({"dataset_id": dataset_id, "candidate_id": cand_ids, "outcome": name, "pool": "all",
                       "value": values[rows, cols], "n": 3}) for name, values in outcomes.items()],
        ignore_index=True,
    )

    # orders: canonical, then distinct cyclic shifts 1..K−1
    shifts = np.arange(n_orders)
    runs, calls, scores = [], [], []
    for j in range(n_judges):
        name, prior, signal, fail_rate = JUDGE_STYLES[j % len(JUDGE_STYLES)]
        judge = name if j < len(JUDGE_STYLES) else f"{name}{j // len(JUDGE_STYLES)}"
        run_id = f"{dataset_id}:{judge}"
        runs.append({"run_id": run_id, "dataset_id": dataset_id, "judge": judge, "kind": "selector",
                     "backend": "simulated", "status": "finished", "model": f"synthetic/{name}",
                     "model_revision": None, "instruction_sha256": None, "manifest_sha256": None,
                     "config_json": None, "started_at": now, "finished_at": now})
        p_idx = np.repeat(np.arange(n_prompts), n_orders)
        order = np.tile(shifts, n_prompts)
        size = m[p_idx]
        slot_of = (np.arange(width)[None, :] - order[:, None]) % size[:, None]  # slot showing canonical c
        utility = np.where(mask[p_idx], alignment[p_idx], -np.inf)
        prior_by_slot = np.array(prior)[np.minimum(slot_of, width - 1)]
        # a judge's own view of each image is shared across orders; only a little noise is per call
        opinion = rng.normal(scale=0.6, size=(n_prompts, width))[p_idx]
        score = signal * utility + opinion + prior_by_slot + rng.gumbel(scale=0.3, size=utility.shape)
        pick = score.argmax(axis=1)
        failed = rng.random(len(pick)) < fail_rate
        # canonical index shown in each slot: c = (s + shift) mod m
        slot_canon = (np.arange(width)[None, :] + order[:, None]) % size[:, None]
        shown = np.arange(width)[None, :] < size[:, None]
        cand_row_start = np.concatenate([[0], np.cumsum(m)])[:-1]
        slot_ids = (cand_ids[(cand_row_start[p_idx][:, None] + slot_canon)[shown]])
        chosen_slot = slot_of[np.arange(len(pick)), pick]
        chosen = np.where(failed, None, cand_ids[cand_row_start[p_idx] + pick])
        labels = np.array(list("ABCD"), dtype=object)[chosen_slot]
        calls.append(pd.DataFrame({
            "run_id": run_id, "prompt_id": prompt_ids[p_idx], "order_index": order.astype(np.int32),
            "slot_candidate_ids": _list_column(slot_ids, size), "status": np.where(failed, "parse_fail", "ok"),
            "choice_label": np.where(failed, None, labels), "chosen_candidate_id": chosen, "ranking": None,
            "raw_output": np.where(failed, "I think the second one is best.", None), "parse_note": None,
            "attempts": 1, "seconds": rng.gamma(2.0, 1.5, size=len(pick)), "input_json": None,
            "request_key": np.char.add(f"{run_id}:", np.arange(len(pick)).astype(str)).astype(object),
            "created_at": now,
        }))
    if scorer:
        run_id = f"{dataset_id}:clip"
        runs.append({"run_id": run_id, "dataset_id": dataset_id, "judge": "clip", "kind": "scorer",
                     "backend": "simulated", "status": "finished", "model": "synthetic/clip",
                     "model_revision": None, "instruction_sha256": None, "manifest_sha256": None,
                     "config_json": None, "started_at": now, "finished_at": now})
        cosine = 0.22 + 0.03 * alignment + 0.02 * rng.normal(size=alignment.shape)
        scores.append(pd.DataFrame({"run_id": run_id, "candidate_id": cand_ids, "score": cosine[rows, cols]}))

    return {"prompts": prompts, "candidates": candidates, "ratings": ratings, "runs": pd.DataFrame(runs),
            "calls": calls, "scores": scores}


OUTCOME_COLUMNS = ("alignment", "stereotype", "missing_explicit", "missing_implicit", "image_quality", "overall")
DECISION_COLUMNS = ("prompt_id", "order_index", "slot_candidate_ids", "status", "choice_label", "chosen_candidate_id",
                    "raw_output", "seconds")
FORMATS = ("parquet", "csv", "jsonl")


def export_synthetic_tables(
    folder: str | Path,
    n_prompts: int,
    n_judges: int = 3,
    n_orders: int = 3,
    seed: int = 0,
    formats: Sequence[str] = ("parquet",),
    chunk: int = 100_000,
) -> dict[str, dict[str, Path]]:
    """Write a generated dataset as table-contract files in `folder`; returns {format: {role: path}}.

    Roles: `pools` (one row per candidate, its six ratings and n), `decisions <judge>` per judge and
    `scores clip`. Prompts are drawn `chunk` at a time (chunk k from the generator seeded (seed, k)),
    so memory stays bounded whatever `n_prompts`; Parquet is written first, CSV (lists as 'a|b|c')
    and JSONL are converted from it by DuckDB.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    now = utc_now()
    writers: dict[str, pq.ParquetWriter] = {}
    paths: dict[str, Path] = {}
    try:
        for k, first in enumerate(range(0, n_prompts, chunk)):
            frames = synthetic_frames(min(chunk, n_prompts - first), n_judges, n_orders,
                                      np.random.default_rng([seed, k]), "synthetic", now, first=first)
            for role, table in _contract_tables(frames).items():
                if role not in writers:
                    paths[role] = folder / f"{role.replace(' ', '-')}.parquet"
                    writers[role] = pq.ParquetWriter(paths[role], table.schema)
                writers[role].write_table(table)
    finally:
        for writer in writers.values():
            writer.close()
    out = {"parquet": paths}
    con = duckdb.connect()
    try:
        for form in (f for f in formats if f != "parquet"):
            out[form] = {}
            for role, path in paths.items():
                target = path.with_suffix(f".{form}")
                select = (f"SELECT * REPLACE (array_to_string(slot_candidate_ids, '|') AS slot_candidate_ids) "
                          f"FROM read_parquet({_sql_text(path)})" if form == "csv" and role.startswith("decisions")
                          else f"SELECT * FROM read_parquet({_sql_text(path)})")
                options = "FORMAT CSV, HEADER" if form == "csv" else "FORMAT JSON"
                con.execute(f"COPY ({select}) TO {_sql_text(target)} ({options})")
                out[form][role] = target
    finally:
        con.close()
    if "parquet" not in formats:
        for path in paths.values():
            path.unlink()
        del out["parquet"]
    return out


def _sql_text(path: Path) -> str:
    """A path we made, as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


def _contract_tables(frames: dict) -> dict[str, pa.Table]:
    """The store frames of one range of prompts as table-contract tables: pools, decisions per judge, scores."""
    candidates = frames["candidates"].merge(frames["prompts"].drop(columns="dataset_id"), on="prompt_id")
    ratings = frames["ratings"]
    pools = {c: candidates[c] for c in ("prompt_id", "prompt", "country", "category", "split", "candidate_id",
                                        "source_model")}
    n_cands = len(candidates)
    for k, outcome in enumerate(OUTCOME_COLUMNS):  # the ratings frame holds one block per outcome, in candidate order
        pools[outcome] = ratings["value"].to_numpy()[k * n_cands:(k + 1) * n_cands]
    pools["n"] = np.full(n_cands, 3, dtype=np.int64)
    tables = {"pools": pa.Table.from_pandas(pd.DataFrame(pools), preserve_index=False)}
    for run, calls in zip(frames["runs"].itertuples(), frames["calls"]):
        table = pa.Table.from_pandas(calls[list(DECISION_COLUMNS)], preserve_index=False)
        tables[f"decisions {run.judge}"] = table.replace_schema_metadata(None)
    for scores in frames["scores"]:
        tables["scores clip"] = pa.Table.from_pandas(scores[["candidate_id", "score"]], preserve_index=False)
    return tables


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.synthetic", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", type=Path, help="write the dataset into this store")
    where.add_argument("--tables", type=Path, metavar="DIR", help="write it as table-contract files in DIR")
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=["parquet"], help="with --tables")
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scorer", action="store_true")
    parser.add_argument("--dataset", default=None, help="dataset id (default synthetic-<prompts>)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.tables is not None:
        written = export_synthetic_tables(args.tables, args.prompts, args.judges, args.orders, args.seed, args.formats)
        files = sum(len(roles) for roles in written.values())
        print(f"wrote {files} tables of {args.prompts} prompts to {args.tables} in {time.perf_counter() - started:.1f} s")
        return 0
    dataset = build_synthetic_db(args.db, args.prompts, args.judges, args.orders, args.seed,
                                 not args.no_scorer, args.dataset)
    print(f"wrote dataset {dataset!r} to {args.db} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
