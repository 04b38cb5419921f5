"""id_hash and id_hashes: BLAKE2b of 8 bytes keyed by the purpose, read little-endian, checked against
hashlib called directly, for any text and array shape."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit_core.stats.id_hash import id_hash, id_hashes


def reference(text: str, purpose: str) -> int:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, person=purpose.encode("utf-8")).digest()
    return int.from_bytes(digest, "little")


@given(st.lists(st.text(max_size=40), max_size=30), st.sampled_from(["fold", "tie", "calibration", ""]))
def test_every_hash_is_blake2b_keyed_by_the_purpose(texts, purpose):
    hashed = id_hashes(np.array(texts, dtype=object), purpose)
    assert hashed.dtype == np.uint64 and hashed.shape == (len(texts),)
    assert [int(h) for h in hashed] == [reference(t, purpose) for t in texts]
    assert [id_hash(t, purpose) for t in texts] == [reference(t, purpose) for t in texts]


def test_the_shape_is_kept_and_a_long_purpose_refused():
    grid = np.array([["p1/a", "p1/b"], ["p2/a", "p2/b"], ["p3/a", ""]], dtype=object)
    hashed = id_hashes(grid, "tie")
    assert hashed.shape == (3, 2) and int(hashed[2, 1]) == reference("", "tie")
    with pytest.raises(ValueError, match="longer than 16 bytes"):
        id_hashes(grid, "x" * 17)
    with pytest.raises(ValueError, match="longer than 16 bytes"):
        id_hash("p1", "x" * 17)
