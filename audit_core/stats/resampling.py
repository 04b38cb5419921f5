"""The resampling settings every interval is computed under, as one value."""

from __future__ import annotations

import operator
from dataclasses import dataclass


@dataclass(frozen=True)
class Resampling:
    """`resamples` bootstrap resamples under `seed`: the same settings give the same intervals;
    0 resamples computes every estimate and leaves the intervals undefined (NaN).

    Both are whole numbers at least 0 (TypeError for a bool, a float or a string, ValueError below
    0, each naming the field); numpy integers are kept as Python ints, so the settings are written
    to JSON as they are (summary.json and the audit cache's keys hold them as "resamples" and "seed").
    """

    resamples: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("resamples", "seed"):
            value = getattr(self, name)
            try:
                whole = operator.index(value)
            except TypeError:
                whole = None
            if whole is None or isinstance(value, bool):
                raise TypeError(f"{name} must be a whole number, got {value!r}")
            if whole < 0:
                raise ValueError(f"{name} must be a whole number at least 0, got {value!r}")
            object.__setattr__(self, name, whole)
