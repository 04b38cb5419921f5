"""A study's shape, and one partition's arrays padded to it.

A partition loaded alone (`store.partitions.open_partition`) sizes its arrays from its own rows: its widest
pool, each judge's most orders, the judges, scorers and outcomes that have rows among its prompts. The study's
shape is the widest of every partition's (`StudyShape.__or__`), and `padded` gives a partition's
`SelectionData` that shape, filling what the partition lacks as the whole study's loader fills padding (no
candidate, NO_CALL, NaN, ""): it is then the whole study's rows of those prompts, which the audit's per-prompt
rules need (the same policies, the same columns), and the judges' ordered calls loaded for it
(`debiased.load_ordered_calls`) have the study's shape too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from audit_core.selection.data import NO_CALL, SelectionData, index_dtype


@dataclass(frozen=True)
class StudyShape:
    """width: the largest pool M; orders: judge -> K; scorers, outcomes: names; votes: some candidate has
    alignment votes (a vote-variance array)."""

    width: int
    orders: tuple[tuple[str, int], ...]
    scorers: tuple[str, ...]
    outcomes: tuple[str, ...]
    votes: bool

    def __or__(self, other: StudyShape) -> StudyShape:
        orders = dict(self.orders)
        for judge, k in other.orders:
            orders[judge] = max(k, orders.get(judge, 0))
        return StudyShape(max(self.width, other.width), tuple(sorted(orders.items())),
                          tuple(sorted({*self.scorers, *other.scorers})),
                          tuple(sorted({*self.outcomes, *other.outcomes})), self.votes or other.votes)


def shape_of(data: SelectionData) -> StudyShape:
    """The shape of `data`'s own arrays."""
    return StudyShape(data.mask.shape[1], tuple((j, data.n_orders(j)) for j in data.judges), tuple(data.scorers),
                      tuple(sorted(data.outcomes)), data.vote_variance is not None)


def padded(data: SelectionData, shape: StudyShape) -> SelectionData:
    """`data` with `shape`'s width, judges, orders, scorers and outcomes (module docstring)."""
    n, width = data.n_prompts, shape.width
    extra = width - data.mask.shape[1]
    if extra < 0:
        raise ValueError(f"the study is {width} candidates wide, the partition {data.mask.shape[1]}")

    def wide(values: np.ndarray, fill: object) -> np.ndarray:
        return np.pad(values, ((0, 0), (0, extra)), constant_values=fill) if extra else values

    def calls(values: dict[str, np.ndarray], fill: object, dtype: object) -> dict[str, np.ndarray]:
        out = {}
        for judge, k in shape.orders:
            own = values.get(judge)
            out[judge] = np.full((n, k), fill, dtype=dtype)
            if own is not None:
                out[judge][:, :own.shape[1]] = own
        return out

    nan = np.full((n, width), np.nan)
    compact = index_dtype(width)
    return replace(
        data,
        candidate_ids=wide(data.candidate_ids, ""),
        source_models=wide(data.source_models, ""),
        mask=wide(data.mask, False),
        outcomes={name: wide(data.outcomes[name], np.nan) if name in data.outcomes else nan.copy()
                  for name in shape.outcomes},
        picks=calls(data.picks, NO_CALL, compact),
        slots=calls(data.slots, -1, compact),
        statuses=calls(data.statuses, "", object),
        scores={name: wide(data.scores[name], np.nan) if name in data.scores else nan.copy()
                for name in shape.scorers},
        vote_variance=(None if not shape.votes else nan.copy() if data.vote_variance is None
                       else wide(data.vote_variance, np.nan)),
    )
