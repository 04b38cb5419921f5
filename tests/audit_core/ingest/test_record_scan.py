"""Where each record of a CSV or JSONL file starts (`record_scan`), against Python's own parsers, and the
manifest hash computed in SQL (`staged.manifest_sha256`) against `store.manifest_sha256`.

Files are built from random fields (quoted cells holding commas, doubled quotes and every kind of line
break, blank lines, a byte-order mark) and scanned in blocks of a few bytes as well as whole, so a
`\\r\\n` or a quoted cell split by a block's edge is met too.
"""

from __future__ import annotations

import csv
import io
import json

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core import store
from audit_core.ingest import record_scan
from audit_core.ingest.staged import manifest_sha256

BREAKS = st.sampled_from([b"\n", b"\r\n", b"\r"])
PLAIN = st.text(alphabet="ab \t\u00e9\u202e", max_size=4).map(lambda t: t.encode())
QUOTED = st.lists(st.sampled_from([b"a", b'""', b",", b"\n", b"\r\n", b"\r", b" "]), max_size=5).map(
    lambda parts: b'"' + b"".join(parts) + b'"')


@st.composite
def csv_files(draw) -> bytes:
    """RFC 4180 CSV: records of plain or quoted cells, any line breaks, blank lines, maybe a BOM, maybe no final break."""
    records = draw(st.lists(st.lists(st.one_of(PLAIN, QUOTED), min_size=1, max_size=3), max_size=6))
    data = b"".join(b",".join(cells) + draw(BREAKS) + (draw(BREAKS) if draw(st.booleans()) else b"")
                    for cells in records)
    if draw(st.booleans()):
        data = data.rstrip(b"\r\n")
    return (record_scan.BOM if draw(st.booleans()) else b"") + data


def python_csv_lines(data: bytes) -> list[int]:
    """The line each non-empty record starts on, as `tables._csv_rows` counts them."""
    text = data.decode("utf-8")
    text = text[1:] if text.startswith("\ufeff") else text
    reader = csv.reader(io.StringIO(text, newline=""))
    lines, start = [], 1
    for cells in reader:
        if cells:
            lines.append(start)
        start = reader.line_num + 1
    return lines


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(data=csv_files(), block=st.sampled_from([1, 2, 3, 7, 1 << 20]))
def test_csv_records_start_where_the_csv_module_says(data, block, tmp_path_factory):
    path = tmp_path_factory.mktemp("scan") / "t.csv"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_scan, "BLOCK_BYTES", block)
        found = record_scan.csv_records(path)
    assert list(found.lines) == python_csv_lines(data)
    text = path.read_bytes()
    for start, end, breaks in zip(found.starts, found.ends, found.breaks):
        record = text[start:end].decode()
        assert breaks == len(record.replace("\r\n", "\n").replace("\r", "\n").split("\n")) - 1


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(lines=st.lists(st.sampled_from([b'{"a": 1}', b"", b"  ", b"\t\r", b'{"b": "x\\ny"}', b"[1]", b" {}"]), max_size=8),
       bom=st.booleans(), final=st.booleans(), block=st.sampled_from([1, 2, 5, 1 << 20]))
def test_jsonl_lines_are_the_lines_python_reads(lines, bom, final, block, tmp_path_factory):
    data = (record_scan.BOM if bom else b"") + b"\n".join(lines) + (b"\n" if final else b"")
    path = tmp_path_factory.mktemp("scan") / "t.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_scan, "BLOCK_BYTES", block)
        found = record_scan.jsonl_lines(path)
    text = data.decode()
    text = text[1:] if text.startswith("\ufeff") else text
    expected = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip(" \t\r")]
    assert list(found.lines) == [n for n, _ in expected]
    assert [data[s:e].decode().lstrip("\ufeff") for s, e in zip(found.starts, found.ends)] == [t for _, t in expected]


TEXTS = st.text(alphabet=st.sampled_from(['a', 'b', '"', "\\", "\n", "\t", "\x00", "\x1f", "\x7f", "\u00e9", "\u2028",
                                          "\U0001f44d", " "]), min_size=1, max_size=6)


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(pools=st.dictionaries(TEXTS, st.tuples(TEXTS, st.sets(TEXTS, min_size=1, max_size=3)), min_size=1, max_size=4))
def test_the_manifest_in_sql_is_the_stores(pools):
    prompts = pd.DataFrame({"prompt_id": list(pools), "prompt": [text for text, _ in pools.values()]})
    candidates = pd.DataFrame([{"prompt_id": pid, "candidate_id": f"{pid}|{cid}"} for pid, (_, ids) in pools.items()
                               for cid in ids])
    con = duckdb.connect()
    try:
        con.execute("ATTACH ':memory:' AS pools")
        con.register("prompt_frame", prompts)
        con.register("candidate_frame", candidates)
        con.execute("CREATE TABLE pools.prompts AS SELECT * FROM prompt_frame")
        con.execute("CREATE TABLE pools.candidates AS SELECT * FROM candidate_frame")
        assert manifest_sha256(con) == store.manifest_sha256(candidates, prompts), json.dumps(pools)
    finally:
        con.close()
