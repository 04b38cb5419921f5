"""`chunks.row_chunks`: consecutive slices covering the rows once, in order, one empty slice for none."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit_core.chunks import row_chunks


@given(st.integers(0, 200), st.integers(1, 50))
def test_row_chunks_cover_the_rows_once_in_order(n_rows, size) -> None:
    chunks = row_chunks(n_rows, size)
    covered = [row for part in chunks for row in range(n_rows)[part]]
    assert covered == list(range(n_rows))
    assert all(part.step is None and 0 <= part.start <= part.stop <= n_rows for part in chunks)
    assert all(0 < part.stop - part.start <= size for part in chunks if n_rows)
    assert all(part.stop - part.start == size for part in chunks[:-1])
    if n_rows == 0:
        assert chunks == [slice(0, 0)]


@pytest.mark.parametrize("n_rows, size", [(5, 0), (5, -1), (-1, 3)])
def test_row_chunks_refuse_an_empty_chunk_size_or_negative_rows(n_rows, size) -> None:
    with pytest.raises(ValueError, match="size"):
        row_chunks(n_rows, size)
