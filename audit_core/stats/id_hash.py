"""The fixed rule that turns an id into a number: 64 bits of BLAKE2b, keyed by what the number is for.

The debiased selectors' folds, calibration subset and tie order and the Poisson bootstrap's
prompt keys all come from ids through `id_hash`, so they depend neither on row order, nor on
ratings, nor on what the judge answered; a different `purpose` gives an independent draw for the
same id (the empty purpose is plain BLAKE2b).
"""

from __future__ import annotations

import hashlib

import numpy as np


def id_hash(text: str, purpose: str) -> int:
    """int.from_bytes(BLAKE2b(text, digest 8 bytes, person = purpose), little-endian), in [0, 2⁶⁴)."""
    person = purpose.encode()
    if len(person) > hashlib.blake2b.PERSON_SIZE:
        raise ValueError(f"purpose {purpose!r} is longer than {hashlib.blake2b.PERSON_SIZE} bytes")
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8, person=person).digest(), "little")


def id_hashes(texts: np.ndarray, purpose: str) -> np.ndarray:
    """`id_hash` of every text, same shape, as uint64."""
    flat = [id_hash(str(t), purpose) for t in np.asarray(texts, dtype=object).ravel()]
    return np.array(flat, dtype=np.uint64).reshape(np.shape(texts))
