"""Consecutive chunks of rows: the one loop every pass over a large study's arrays walks, and every
bootstrap that makes its resamples a block at a time. Each pass keeps its own chunk size beside it
(`calls.CALL_CHUNK`, `partials.chunk_rows`, `poisson.MIX_ELEMENTS`, `rubric_vs_scorer.CHUNK_ELEMENTS`, …).
A leaf beside `errors`: imports nothing from the project, so that every layer of it, `stats` included,
can use it."""

from __future__ import annotations


def row_chunks(n_rows: int, size: int) -> list[slice]:
    """Slices lo:min(lo + size, n_rows) for lo = 0, size, 2·size, … covering 0..n_rows in order; one
    empty slice 0:0 when n_rows is 0 (callers concatenate a part per chunk); ValueError for n_rows < 0 or
    size < 1."""
    if n_rows < 0 or size < 1:
        raise ValueError(f"expected n_rows >= 0 rows in chunks of size >= 1, got n_rows {n_rows}, size {size}")
    return [slice(lo, min(lo + size, n_rows)) for lo in range(0, max(n_rows, 1), size)]
