"""Where each record of a CSV or JSONL file starts: physical line and byte span, found with numpy.

The table readers name a row by the physical line it starts on, as Python's own parsers count
lines (`tables.read_rows`). DuckDB reads the rows but does not say which line each came from; these
scans say it, in a few vectorised passes over the bytes, a block at a time (memory stays a few
times the block size).

CSV: a line break is `\\n`, `\\r\\n` or a lone `\\r` (Python's universal newlines); it ends a record
when an even number of `"` precede it (RFC 4180 quoting: a quote opens or closes a quoted field, or is
doubled inside one). Empty records (blank lines) are left out, as both parsers skip them. A file whose
quotes do not follow RFC 4180 gives records that differ from the rows DuckDB reads; the caller
compares them (their number and the line breaks inside each) and reads such a file the slow way.

JSONL: lines end at `\\n` alone (`str.split("\\n")`); a line holding only spaces, tabs and `\\r` is blank.

A byte-order mark at the start of the file is skipped, as `sources.decoded` skips it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit_core.ingest import input_files

BLOCK_BYTES = 64 << 20
BOM = b"\xef\xbb\xbf"
QUOTE, LF, CR, SPACE, TAB = (ord(c) for c in '"\n\r \t')


@dataclass(frozen=True)
class Records:
    """Non-empty records of a file, in order: start line (from 1), byte span [start, end) without the
    line break, and how many line breaks lie inside the record (quoted cells spanning lines)."""

    lines: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    breaks: np.ndarray

    def __len__(self) -> int:
        return len(self.lines)


def _blocks(path: Path) -> Iterator[tuple[int, np.ndarray]]:
    """(offset, bytes) of the file in blocks after a leading BOM; a block never ends inside `\\r\\n`."""
    with input_files.opened(path, input_files.TABLE) as handle:
        head = handle.read(len(BOM))
        offset = len(BOM) if head == BOM else 0
        pending = b"" if offset else head
        while True:
            data = handle.read(BLOCK_BYTES)
            block, pending = pending + data, b""
            if data and block.endswith(b"\r"):  # its \n may start the next read
                block, pending = block[:-1], b"\r"
            if block:
                yield offset, np.frombuffer(block, dtype=np.uint8)
                offset += len(block)
            if not data:
                return


def csv_records(path: str | Path) -> Records:
    """The non-empty records of a CSV file, the header's first."""
    positions, ends, quotes_before = [], [], []
    quotes, start, end = 0, None, 0
    for offset, block in _blocks(Path(path)):
        start = offset if start is None else start
        quote_at = np.flatnonzero(block == QUOTE)
        cr = np.flatnonzero(block == CR)
        lf = np.flatnonzero(block == LF)
        pair = np.zeros(len(cr), dtype=bool)
        inside = cr + 1 < len(block)
        pair[inside] = block[cr[inside] + 1] == LF
        lone_lf = lf[~np.isin(lf, cr[pair] + 1)]
        at = np.concatenate([cr, lone_lf])
        width = np.concatenate([np.where(pair, 2, 1), np.ones(len(lone_lf), dtype=np.int64)])
        order = np.argsort(at, kind="stable")
        at, width = at[order], width[order]
        positions.append(at + offset)
        ends.append(at + width + offset)
        quotes_before.append(quotes + np.searchsorted(quote_at, at))
        quotes += len(quote_at)
        end = offset + len(block)
    if start is None:
        empty = np.zeros(0, np.int64)
        return Records(empty, empty, empty, empty)
    pos, stop, before = (np.concatenate(parts).astype(np.int64) for parts in (positions, ends, quotes_before))
    boundary = before % 2 == 0
    starts = np.concatenate([[start], stop[boundary]]).astype(np.int64)
    finishes = np.concatenate([pos[boundary], [end]]).astype(np.int64)
    # a record's line = 1 + the breaks before it; breaks inside = the breaks before its end, less those
    line = 1 + np.searchsorted(pos, starts)
    breaks = np.searchsorted(pos, finishes) + 1 - line
    kept = finishes > starts
    return Records(line[kept], starts[kept], finishes[kept], breaks[kept])


def jsonl_lines(path: str | Path) -> Records:
    """The non-blank lines of a JSONL file."""
    lines, starts, ends = [], [], []
    number, open_start, open_filled, end = 1, None, False, 0
    for offset, block in _blocks(Path(path)):
        open_start = offset if open_start is None else open_start
        filled = (block != SPACE) & (block != TAB) & (block != CR) & (block != LF)
        lf = np.flatnonzero(block == LF)
        seg_starts = np.concatenate([[0], lf + 1])
        any_filled = np.zeros(len(seg_starts), dtype=bool)
        valid = seg_starts < len(block)  # the segment after a final \n is empty
        if valid.any():
            # a segment's reduction runs to the next start, over its \n, which is never `filled`
            any_filled[valid] = np.logical_or.reduceat(filled, seg_starts[valid])
        any_filled[0] |= open_filled
        complete = any_filled[: len(lf)]
        seg_abs = np.concatenate([[open_start], seg_starts[1 : len(lf)] + offset])[: len(lf)]
        lines.append((number + np.arange(len(lf)))[complete])
        starts.append(seg_abs[complete])
        ends.append((lf + offset)[complete])
        number += len(lf)
        if len(lf):
            open_start = int(seg_starts[-1]) + offset
        open_filled = bool(any_filled[-1])
        end = offset + len(block)
    if open_filled:
        lines.append(np.array([number]))
        starts.append(np.array([open_start]))
        ends.append(np.array([end]))
    joined = [np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
              for parts in (lines, starts, ends)]
    return Records(*joined, np.zeros(len(joined[0]), np.int64))
