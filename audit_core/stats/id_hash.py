"""The fixed rule that turns an id into a number: 64 bits of BLAKE2b, keyed by what the number is for.

The debiased selectors' folds, calibration subset and tie order and the Poisson bootstrap's
prompt keys all come from ids through `id_hash`, so they depend neither on row order, nor on
ratings, nor on what the judge answered; a different `purpose` gives an independent draw for the
same id (the empty purpose is plain BLAKE2b).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

import numpy as np


def id_hash(text: str, purpose: str) -> int:
    """int.from_bytes(BLAKE2b(text, digest 8 bytes, person = purpose), little-endian), in [0, 2⁶⁴)."""
    return int.from_bytes(_digest(_person(purpose))(text.encode()).digest(), "little")


def id_hashes(texts: np.ndarray, purpose: str) -> np.ndarray:
    """`id_hash` of every text, same shape, as uint64 (the digests joined and read as little-endian
    words: a million ids in about half a second, no Python int per id)."""
    digest = _digest(_person(purpose))
    joined = b"".join([digest(str(t).encode()).digest() for t in np.asarray(texts, dtype=object).ravel()])
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64).reshape(np.shape(texts))


def _person(purpose: str) -> bytes:
    person = purpose.encode()
    if len(person) > hashlib.blake2b.PERSON_SIZE:
        raise ValueError(f"purpose {purpose!r} is longer than {hashlib.blake2b.PERSON_SIZE} bytes")
    return person


def _digest(person: bytes) -> Callable[[bytes], hashlib.blake2b]:
    """BLAKE2b of 8 bytes keyed by `person`, as a function of the bytes to hash."""
    return functools.partial(hashlib.blake2b, digest_size=8, person=person)
