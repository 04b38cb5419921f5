"""The study's index draws, made from one shared stream per seed: `StudyDraws(seed)` draws as a
fresh `np.random.default_rng(seed)` does, at about half numpy's cost per draw.

A fixed-n statistic over n ≤ `bootstrap.EXACT_DRAWS_UP_TO` values resamples with the index draws
the published study made, `default_rng(seed).integers(0, n, size=(B, n))` with a fresh generator
per statistic; the worst group continues one generator across its groups. numpy makes each such
draw from the generator's next 32-bit output u by Lemire's method: the index is ⌊u·n / 2³²⌋,
unless the low 32 bits of u·n fall below 2³² mod n, in which case u is skipped and the next
output tried (a chance below n / 2³² per draw). All of them therefore read one stream of 32-bit
outputs per seed, each from its own position and with its own n. This module makes that stream
once per seed, up to STREAM_LIMIT outputs, shared by every thread, and computes a draw from it
with a few array passes: the float product u·(n·2⁻³²) is exact for n < EXACT_N_BELOW, so its
truncation is the index, and the skips are where u·n mod 2³² (uint32 arithmetic) falls below
the threshold. Past STREAM_LIMIT, a generator advanced to the position takes over and numpy draws.
"""

from __future__ import annotations

import threading

import numpy as np

STREAM_LIMIT = 1 << 24  # 32-bit outputs kept per seed (64 MB): 10,000 resamples of 1,677 values
EXACT_N_BELOW = 1 << 21  # u·n < 2⁵³ for every 32-bit u: the float product is exact
SEEDS_KEPT = 2  # streams kept at once (an audit uses one seed)

_streams: dict[int, np.ndarray] = {}
_streams_lock = threading.Lock()


def stream_prefix(seed: int, length: int) -> np.ndarray:
    """At least the first `length` (≤ STREAM_LIMIT) 32-bit outputs of `default_rng(seed)`, in the
    order its next_uint32 gives them (each 64-bit output's low half, then its high half); read-only."""
    with _streams_lock:
        kept = _streams.get(seed, np.empty(0, dtype=np.uint32))
        if len(kept) < length:
            size = min(STREAM_LIMIT, max(length, 2 * len(kept)))
            outputs = np.random.default_rng(seed).bit_generator
            outputs.advance(len(kept) // 2)  # what is kept (always whole 64-bit outputs) is not made again
            raw = outputs.random_raw((size - len(kept) + 1) // 2)
            more = np.empty(2 * len(raw), dtype=np.uint32)
            more[0::2] = raw & np.uint64(0xFFFF_FFFF)
            more[1::2] = raw >> np.uint64(32)
            kept = np.concatenate([kept, more])
            kept.flags.writeable = False
            _streams.pop(seed, None)
            while len(_streams) >= SEEDS_KEPT:
                _streams.pop(next(iter(_streams)))
            _streams[seed] = kept
        return kept


class StudyDraws:
    """The index draws of `np.random.default_rng(seed)` from its start: `integers(0, n, size, dtype)`
    and `spawn` give what that generator's would, call after call. One thread at a time."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._sequence = np.random.SeedSequence(seed)
        self._position = 0  # 32-bit outputs consumed
        self._generator: np.random.Generator | None = None  # numpy's, once past STREAM_LIMIT

    def spawn(self, n_children: int) -> list[np.random.Generator]:
        """As `default_rng(seed).spawn(n_children)`, the first call and each later one."""
        return [np.random.default_rng(child) for child in self._sequence.spawn(n_children)]

    def integers(self, low: int, high: int, size: int, dtype: type = np.int64) -> np.ndarray:
        """`size` draws in [0, high) as `Generator.integers(0, high, size=size, dtype=dtype)`
        (low must be 0, high at most 2³²)."""
        if low != 0 or not 0 < high <= 1 << 32:
            raise ValueError(f"StudyDraws draws in [0, n) with 0 < n ≤ 2³², not [{low}, {high})")
        n = int(high)
        if n == 1:  # numpy returns zeros without drawing
            return np.zeros(size, dtype=dtype)
        if self._generator is None and (n >= EXACT_N_BELOW or self._position + size > STREAM_LIMIT):
            self._generator = self._numpy_generator()
        if self._generator is not None:
            return self._generator.integers(0, n, size=size, dtype=dtype)
        start = self._position
        u = stream_prefix(self._seed, start + size)[start:start + size]
        self._position += size
        drawn = (u * (n * 2.0 ** -32)).astype(dtype)  # exact product, truncated: ⌊u·n / 2³²⌋
        threshold = (1 << 32) % n
        if threshold:
            skipped = np.flatnonzero(u * np.uint32(n) < threshold)  # u·n mod 2³² below the threshold
            if len(skipped):
                return np.concatenate([np.delete(drawn, skipped), self.integers(0, n, len(skipped), dtype)])
        return drawn

    def _numpy_generator(self) -> np.random.Generator:
        """`default_rng(seed)` advanced past the outputs consumed so far."""
        generator = np.random.default_rng(self._seed)
        generator.bit_generator.advance(self._position // 2)
        if self._position % 2:
            generator.integers(0, 1 << 32, dtype=np.uint32)  # one 32-bit output; its other half stays buffered
        return generator
