"""Partitions of a dataset (`audit_core.store.partitions`): each one, opened alone, loads as the whole study's
rows of its prompts (but for the padding it lacks) with the store's loaders unchanged, on the built-in demo, a
generated study and the published JudgeActs main split; quotes in ids, a dataset id and a folder are data; the
store is only read, and a partition's connection reaches no other file."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from audit_core import store
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.selection.debiased.calls import OrderedCalls, load_ordered_calls
from audit_core.store.partitions import EXPORT_CONFIG, Partition, export_partitions, export_store, open_partition
from benchmarks.synthetic import build_synthetic_db
from tests.support.snapshots import snapshot

QUOTE = "it's "  # put before every prompt id of the quoted study


@pytest.fixture(scope="module")
def quoted_db(tmp_path_factory) -> tuple[Path, str]:
    """A generated study whose dataset id and every prompt id hold a single quote."""
    db = tmp_path_factory.mktemp("quoted") / "quoted.duckdb"
    dataset = build_synthetic_db(db, n_prompts=20, seed=1, dataset_id="it's")
    con = store.connect(db)
    try:
        for table in ("prompts", "candidates", "calls"):
            con.execute(f"UPDATE {table} SET prompt_id = ? || prompt_id", [QUOTE])
    finally:
        con.close()
    return db, dataset


def exporter(db: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(db), read_only=True, config=dict(EXPORT_CONFIG))


def crop(whole: np.ndarray, part: np.ndarray) -> np.ndarray:
    """`whole` cut to `part`'s shape: a partition's arrays stop at its own widest pool and most orders."""
    return np.asarray(whole)[tuple(slice(0, n) for n in np.shape(part))]


def assert_same(part: np.ndarray, whole: np.ndarray, name: str) -> None:
    """Equal values (NaN equal to NaN) and type, `whole` cropped to `part`'s shape."""
    assert np.asarray(part).dtype == np.asarray(whole).dtype, name
    np.testing.assert_array_equal(np.asarray(part), crop(whole, part), err_msg=name)


def assert_same_data(part: SelectionData, whole: SelectionData) -> None:
    """`part` (a partition's load) is `whole` (the whole study's rows of the same prompts) in every field; what
    `whole` has beyond `part`'s arrays is padding: candidates absent, orders without a call."""
    width = part.mask.shape[1]
    assert not whole.mask[:, width:].any()
    assert part.dataset_id == whole.dataset_id
    pd.testing.assert_frame_equal(part.prompts, whole.prompts)
    for name in ("candidate_ids", "source_models", "mask", "vote_variance"):
        assert_same(getattr(part, name), getattr(whole, name), name)
    for name in ("outcomes", "picks", "slots", "statuses", "scores"):
        mine, theirs = getattr(part, name), getattr(whole, name)
        assert mine.keys() == theirs.keys(), name
        for key in theirs:
            assert_same(mine[key], theirs[key], f"{name}[{key!r}]")
    for judge, picks in whole.picks.items():
        assert (picks[:, part.n_orders(judge):] == -2).all()  # NO_CALL


def assert_same_calls(part: dict[str, OrderedCalls], whole: dict[str, OrderedCalls]) -> None:
    assert part.keys() == whole.keys()
    for judge, calls in whole.items():
        assert part[judge].judge == judge
        for name in ("prompt_ids", "candidate_ids", "mask", "picks", "slot_order", "rankings", "label_probs",
                     "seconds", "tie_ranks"):
            assert_same(getattr(part[judge], name), getattr(calls, name), f"{judge}: {name}")


def text_rows(texts: pd.DataFrame) -> list[tuple]:
    """`store.load_call_texts`' rows as plain tuples (None for a missing text)."""
    return [tuple(None if pd.isna(v) else v for v in row) for row in texts.astype(object).itertuples(index=False)]


def assert_partitions_load_as_whole(db: Path, dataset: str, parts: list[Partition]) -> None:
    """Every partition loads as the whole study's rows of its prompts (selection data, ordered calls), and the
    partitions' prompts and call texts, in order, are the whole's."""
    con = store.connect(db, read_only=True)
    try:
        whole = load_selection_data(con, dataset)
        whole_calls = load_ordered_calls(con, whole)
        whole_prompts = store.load_prompts(con, dataset)
        whole_texts = text_rows(store.load_call_texts(con, dataset))
    finally:
        con.close()
    assert [p.first for p in parts] == list(np.cumsum([0] + [p.n_prompts for p in parts[:-1]]))
    assert sum(p.n_prompts for p in parts) == whole.n_prompts
    prompts, texts = [], []
    for part in parts:
        con = open_partition(part)
        try:
            data = load_selection_data(con, dataset)
            assert_same_data(data, whole.rows(part.rows))
            assert_same_calls(load_ordered_calls(con, data), {j: c.rows(part.rows) for j, c in whole_calls.items()})
            prompts.append(store.load_prompts(con, dataset))
            texts += text_rows(store.load_call_texts(con, dataset))
        finally:
            con.close()
        assert (part.first_prompt_id, part.last_prompt_id) == tuple(data.prompts["prompt_id"].iloc[[0, -1]])
    pd.testing.assert_frame_equal(pd.concat(prompts, ignore_index=True), whole_prompts)
    assert sorted(texts, key=lambda row: row[0]) == whole_texts  # the whole's: by judge, then prompt


@pytest.mark.parametrize("count", [1, 3, 7])
def test_each_partition_loads_as_the_whole_studys_rows_of_its_prompts(study, count, tmp_path):
    db, dataset = study
    con = exporter(db)
    try:
        parts = export_partitions(con, dataset, tmp_path / "parts", count)
    finally:
        con.close()
    total = sum(p.n_prompts for p in parts)
    assert [p.n_prompts for p in parts] == [len(rows) for rows in np.array_split(np.arange(total), count)]
    assert all(p.folder.parent == tmp_path / "parts" and set(p.files.values()) <= set(p.folder.iterdir())
               for p in parts)
    assert_partitions_load_as_whole(db, dataset, parts)


def test_a_partition_can_be_narrower_than_the_study(demo_study, tmp_path):
    """The demo's seventh range holds pools of 3 only: its arrays have 3 candidate columns, the study's 4."""
    db, dataset = demo_study
    con = exporter(db)
    try:
        parts = export_partitions(con, dataset, tmp_path, 7)
    finally:
        con.close()
    widths = set()
    for part in parts:
        con = open_partition(part)
        try:
            widths.add(load_selection_data(con, dataset).mask.shape[1])
        finally:
            con.close()
    assert widths == {3, 4}


def test_quotes_in_ids_and_a_folder_with_a_quote_and_a_space_are_data(quoted_db, tmp_path):
    db, dataset = quoted_db
    con = exporter(db)
    try:
        parts = export_partitions(con, dataset, tmp_path / "it's a folder", 3)
    finally:
        con.close()
    assert all(p.first_prompt_id.startswith(QUOTE) and "it's a folder" in str(p.folder) for p in parts)
    assert_partitions_load_as_whole(db, dataset, [pickle.loads(pickle.dumps(p)) for p in parts])  # as Ray ships it


def test_one_prompt_a_partition_and_no_more_partitions_than_prompts(demo_study, tmp_path):
    db, dataset = demo_study
    con = exporter(db)
    try:
        with pytest.raises(ValueError, match="24 prompts: it cannot be cut into 25 partitions.*at most 24"):
            export_partitions(con, dataset, tmp_path / "too many", 25)
        with pytest.raises(ValueError, match="count must be at least 1"):
            export_partitions(con, dataset, tmp_path / "none", 0)
        with pytest.raises(KeyError, match="'nope' has no prompts"):
            export_partitions(con, "nope", tmp_path / "unknown", 2)
        parts = export_partitions(con, dataset, tmp_path / "singles", 24)
    finally:
        con.close()
    assert [p.n_prompts for p in parts] == [1] * 24
    assert_partitions_load_as_whole(db, dataset, parts)


def test_a_reader_and_a_folder_that_reads_as_a_pattern_are_refused(demo_study, tmp_path):
    db, dataset = demo_study
    con = store.connect(db, read_only=True)
    try:
        with pytest.raises(ValueError, match="may not write files.*EXPORT_CONFIG"):
            export_partitions(con, dataset, tmp_path / "parts", 2)
    finally:
        con.close()
    con = exporter(db)
    try:
        for folder in ("parts*", "parts?", "parts[1]"):
            with pytest.raises(ValueError, match="may not hold any of"):
                export_partitions(con, dataset, tmp_path / folder, 2)
    finally:
        con.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("linked", ["part-0001", "part-0001/calls.parquet"])
def test_a_link_in_a_partitions_place_is_refused_and_nothing_is_written_through_it(demo_study, tmp_path, linked):
    db, dataset = demo_study
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "parts" / linked).parent.mkdir(parents=True)
    (tmp_path / "parts" / linked).symlink_to(outside / "target", target_is_directory=not linked.endswith("parquet"))
    with pytest.raises(ValueError, match="is a link"):
        export_store(db, dataset, tmp_path / "parts", 2)
    assert list(outside.iterdir()) == []


def test_nothing_is_written_into_the_store(synthetic_study, tmp_path):
    db, dataset = synthetic_study
    before, digest = snapshot(db), hashlib.sha256(db.read_bytes()).hexdigest()
    con = exporter(db)
    try:
        export_partitions(con, dataset, tmp_path / "read", 3)
    finally:
        con.close()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    con = store.connect(db)  # a writer's connection exports too, and writes nothing into the store
    try:
        export_partitions(con, dataset, tmp_path / "written", 3)
        objects = con.execute("SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views() "
                              "WHERE NOT internal ORDER BY 1").fetchall()
    finally:
        con.close()
    assert snapshot(db) == before
    assert [name for (name,) in objects] == sorted(store.TABLE_COLUMNS)


def test_a_partitions_connection_reaches_no_other_file(demo_study, tmp_path):
    db, dataset = demo_study
    con = exporter(db)
    try:
        (part,) = export_partitions(con, dataset, tmp_path, 1)
    finally:
        con.close()
    con = open_partition(part)
    try:
        for sql in (f"SELECT count(*) FROM read_parquet('{tmp_path}/*/*.parquet')",
                    f"ATTACH '{db}' AS store (READ_ONLY)",
                    f"COPY prompts TO '{tmp_path}/copy.parquet' (FORMAT parquet)",
                    "SET enable_external_access = true"):
            with pytest.raises(duckdb.Error):
                con.execute(sql)
        assert con.execute("SELECT count(*) FROM prompts").fetchone() == (24,)
    finally:
        con.close()
