"""Summaries that add up over partitions of a study, and start a `sum` from 0.

A partition's summary (counts, sums, a few values) is added to another's with `+`; `Summable` lets
`sum(summaries)` work too, since `sum` starts from 0 and 0 + a summary is the summary.
"""

from __future__ import annotations


class Summable:
    """A summary with `__add__`: 0 + it is itself (`sum` of summaries)."""

    def __radd__(self, other: object):
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented
