"""The resampling settings every interval is computed under, as one value."""

from __future__ import annotations

import operator
from dataclasses import dataclass


@dataclass(frozen=True)
class Resampling:
    """`resamples` bootstrap resamples under `seed`: the same settings give the same intervals;
    0 resamples computes every estimate and leaves the intervals undefined (NaN)."""

    resamples: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("resamples", "seed"):
            value = getattr(self, name)
            try:
                operator.index(value)
            except TypeError:
                raise TypeError(f"{name} must be a whole number, got {value!r}") from None
            if isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a whole number at least 0, got {value!r}")

