"""Three call-derived tables of a study held in partitions, made from small per-partition summaries.

A *partition* is one contiguous range of a study's prompts: its `SelectionData` and its judges'
`OrderedCalls` (`SelectionData.rows` and `OrderedCalls.rows` of the whole study give exactly one). Each
table has a summary that a worker makes of its partition alone, whose size does not grow with the
prompts, and that adds up (`+`, or `sum` in partition order) on the driver; the table is made of the
summed summary by the rules the whole-study function uses (one home each: the counts and sums are
`position.generator_slot_counts`, `timing.call_sums` and `costs.policy_sums`; the tables
`position.generator_slot_frame`, `timing.timing_row` and `costs.policy_cost_frame`):

- `generator_slot_summary` → `generator_slot_table_from_summary`: `position.generator_slot_table`,
  exactly (presented and chosen are counts, generators keyed by name: partitions see different ones);
- `timing_summary` → `timing_table_from_summary`: `timing.timing_table_from_arrays`. Counts exactly;
  seconds_median exactly numpy's median, found by `order_statistics.median` from one CountPass per judge
  over the partitions' seconds (`local_seconds_passes` where the partitions are here; a driver's pass
  asks each worker for `order_statistics.prefix_counts` of its judge's seconds); the means, ratio and
  hours are sums of the partitions' sums, equal to the whole study's up to float summation order;
- `policy_cost_summary` → `policy_costs_from_summary`: `costs.policy_costs`. calls_per_prompt is a count
  over the prompts, exactly; seconds_per_prompt a sum over a count, up to float summation order.

A partition loaded alone may stop at its own widest pool and most orders: generator-slot counts pad to the
wider side, and timing sums keep a judge's timed prompts only from the side with the most orders (the
other's prompts lack those orders in the whole study). A policy's cost reads a judge's K orders a prompt,
so its partitions must hold each judge's calls in the study's K orders (as `.rows` gives them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from audit_core.selection.costs import policy_cost_frame, policy_sums
from audit_core.selection.data import SelectionData
from audit_core.selection.debiased.calls import OrderedCalls
from audit_core.selection.position import generator_slot_counts, generator_slot_frame
from audit_core.selection.timing import TIMING_COLUMNS, call_sums, not_json_counts, timing_row
from audit_core.stats.order_statistics import CountPass, local_pass, median
from audit_core.summable import Summable

__all__ = [
    "GeneratorSlotSummary", "PolicyCostSummary", "TimingSummary",
    "generator_slot_summary", "generator_slot_table_from_summary",
    "local_seconds_passes", "policy_cost_summary", "policy_costs_from_summary",
    "timing_summary", "timing_table_from_summary",
]

# A policy row's `costs.policy_sums`: (prompts, calls read per judge, seconds, timed prompts, timed), None
# for a kind without a cost rule.
PolicySums = tuple[int, tuple[int, ...], float, int, bool] | None
# `timing.call_sums` over the prompts timed in every order
_PER_TIMED_PROMPT = ("timed_prompts", "one_order_sum", "all_orders_sum")


@dataclass(frozen=True, eq=False)
class GeneratorSlotSummary(Summable):
    """One judge's presented and chosen calls per (generator, slot) of some prompts: generators sorted by
    name, presented and chosen (G, M) int64, M the prompts' largest pool."""

    judge: str
    generators: tuple[str, ...]
    presented: np.ndarray
    chosen: np.ndarray

    def __add__(self, other: GeneratorSlotSummary) -> GeneratorSlotSummary:
        """The counts of both summaries' prompts: generators by name, slots up to the larger width."""
        if not isinstance(other, GeneratorSlotSummary):
            return NotImplemented
        if other.judge != self.judge:
            raise ValueError(f"cannot add judge {self.judge!r}'s generator-slot counts to {other.judge!r}'s")
        generators = tuple(sorted(set(self.generators) | set(other.generators)))
        width = max(self.presented.shape[1], other.presented.shape[1])
        presented = np.zeros((len(generators), width), dtype=np.int64)
        chosen = np.zeros((len(generators), width), dtype=np.int64)
        for part in (self, other):
            rows = pd.Index(generators).get_indexer(list(part.generators))
            presented[rows, :part.presented.shape[1]] += part.presented
            chosen[rows, :part.chosen.shape[1]] += part.chosen
        return GeneratorSlotSummary(self.judge, generators, presented, chosen)


def generator_slot_summary(data: SelectionData, judge: str, calls: OrderedCalls) -> GeneratorSlotSummary:
    """`judge`'s generator-slot counts of the prompts of `data` (a partition; `calls` the judge's calls of
    the same prompts): `position.generator_slot_counts`."""
    generators, presented, chosen = generator_slot_counts(data, judge, calls)
    return GeneratorSlotSummary(judge, tuple(generators), presented, chosen)


def generator_slot_table_from_summary(summary: GeneratorSlotSummary) -> pd.DataFrame:
    """`position.generator_slot_table` of the prompts the summary counts (the same rows, order, dtypes)."""
    return generator_slot_frame(summary.judge, list(summary.generators), summary.presented, summary.chosen)


@dataclass(frozen=True, eq=False)
class TimingSummary(Summable):
    """judge -> its `timing.call_sums` over some prompts (orders, counts and sums of seconds) and `not_json`,
    how many of its calls there do not answer in JSON (`timing.not_json_counts`)."""

    judges: Mapping[str, Mapping[str, int | float]]

    def __add__(self, other: TimingSummary) -> TimingSummary:
        """Each judge's counts and sums added, orders the larger (a judge in one summary only kept as is).

        Prompts loaded with fewer orders than the other side's (a partition's K is its largest order index
        + 1) have no call in the missing orders, so none of them is timed in every order of the sum: their
        timed-prompt count and sums are left out."""
        if not isinstance(other, TimingSummary):
            return NotImplemented
        judges = {judge: dict(sums) for judge, sums in self.judges.items()}
        for judge, sums in other.judges.items():
            mine = judges.setdefault(judge, dict.fromkeys(sums, 0))
            orders = max(mine["orders"], sums["orders"])
            for name, value in sums.items():
                if name in _PER_TIMED_PROMPT:
                    mine[name] = (mine[name] if mine["orders"] == orders else 0) + (
                        value if sums["orders"] == orders else 0)
                elif name != "orders":
                    mine[name] += value
            mine["orders"] = orders
        return TimingSummary(judges)


def timing_summary(statuses: Mapping[str, np.ndarray], seconds: Mapping[str, np.ndarray], texts: pd.DataFrame
                   ) -> TimingSummary:
    """The timing sums of a partition's calls: statuses judge -> (P, K) status ("" where no call), seconds
    judge -> (P, K) seconds (NaN where none), texts: those of its calls that carry text (timing.TEXT_COLUMNS,
    `store.load_call_texts`), as `timing.timing_table_from_arrays` takes them."""
    not_json = not_json_counts(texts)
    return TimingSummary({str(judge): {**call_sums(statuses[judge], np.asarray(seconds[judge], dtype=float)),
                                       "not_json": not_json.get(str(judge), 0)} for judge in statuses})


def local_seconds_passes(partitions: Sequence[Mapping[str, np.ndarray]]) -> dict[str, CountPass]:
    """judge -> the CountPass over that judge's seconds in every partition held here (each a judge -> (P, K)
    seconds mapping, as `timing_summary` takes it): `order_statistics.local_pass`."""
    judges = sorted({judge for part in partitions for judge in part})
    return {judge: local_pass([np.asarray(part[judge], dtype=float) for part in partitions if judge in part])
            for judge in judges}


def timing_table_from_summary(summary: TimingSummary, seconds_passes: Mapping[str, CountPass]) -> pd.DataFrame:
    """`timing.timing_table_from_arrays` of the prompts `summary` sums, one row per judge sorted by name.

    seconds_passes: judge -> a CountPass over its seconds in every partition (`local_seconds_passes`, or
    one asking the workers), for seconds_median (`order_statistics.median`: numpy's median to the bit).
    """
    rows = [timing_row(judge, sums, median(seconds_passes[judge]), sums["not_json"])
            for judge, sums in sorted(summary.judges.items())]
    return pd.DataFrame(rows, columns=TIMING_COLUMNS)


@dataclass(frozen=True, eq=False)
class PolicyCostSummary(Summable):
    """Per row of a policies table, its `costs.policy_sums` over some prompts (None for a kind without a
    cost rule): a few numbers a row, however many prompts."""

    rows: tuple[PolicySums, ...]

    def __add__(self, other: PolicyCostSummary) -> PolicyCostSummary:
        """Row by row: prompts, each judge's calls, seconds and timed prompts added; timed only where both are."""
        if not isinstance(other, PolicyCostSummary):
            return NotImplemented
        if len(other.rows) != len(self.rows):
            raise ValueError(f"cannot add the costs of {len(other.rows)} policies to those of {len(self.rows)}: "
                             "summarise every partition with the same policies table")
        return PolicyCostSummary(tuple(_add_policy_sums(a, b) for a, b in zip(self.rows, other.rows)))


def _add_policy_sums(a: PolicySums, b: PolicySums) -> PolicySums:
    if a is None or b is None:
        if (a is None) != (b is None):
            raise ValueError("a policy has a cost rule in one partition and none in another")
        return None
    if len(a[1]) != len(b[1]):
        raise ValueError(f"a policy reads {len(a[1])} judges in one partition and {len(b[1])} in another")
    return (a[0] + b[0], tuple(x + y for x, y in zip(a[1], b[1])), a[2] + b[2], a[3] + b[3], a[4] and b[4])


def policy_cost_summary(policies: pd.DataFrame, data: SelectionData, ordered: Mapping[str, OrderedCalls]
                        ) -> PolicyCostSummary:
    """The cost sums of every row of `policies` (the audit's policies table: policy, kind, base_judge,
    partner) over a partition's prompts (`data`, and `ordered` its judges' calls of the same prompts)."""
    return PolicyCostSummary(tuple(policy_sums(policy, data, ordered) for policy in policies.to_dict("records")))


def policy_costs_from_summary(policies: pd.DataFrame, summary: PolicyCostSummary) -> pd.DataFrame:
    """`costs.policy_costs` (POLICY_COST_COLUMNS, `policies`' index) of the prompts `summary` sums."""
    if len(summary.rows) != len(policies):
        raise ValueError(f"the summary holds {len(summary.rows)} policies' costs, the table {len(policies)} rows")
    return policy_cost_frame(policies, summary.rows)

