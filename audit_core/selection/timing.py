"""Output validity and cost per judge, from the recorded calls and their seconds.

Input: each judge's calls per (prompt, order) as arrays, status ("" where no call) and seconds (NaN
where none), as the audit holds them already (`SelectionData.statuses`, `OrderedCalls.seconds`), and
the few calls that carry text (judge, raw_output, parse_note; `store.load_call_texts`):
`timing_table_from_arrays`. `timing_table` takes the call rows as `store.load_calls` returns them
(TIMING_CALL_COLUMNS suffice) and reduces them to those arrays, so both give the same table. The store
holds at most one call per (judge, prompt, order): ingest refuses a repeated (prompt, order) in a run
and a second run under a judge's name, and a recorder skips a request key already recorded (the key is
a function of the judge, prompt, order, its slot order and the judge's fixed instruction and manifest).
One row per judge:

- orders: K, the judge's number of presentation orders (largest order index + 1);
- calls: recorded calls; valid: calls the strict parser accepted (status ok; the
  judges table's `valid` also counts recovered ones); recovered: calls the lenient
  adapter recovered; failed: parse or runtime failures, so valid + recovered +
  failed = calls;
- not_json: calls whose output is not JSON at all (failed or recovered alike): the
  recorded flag `json_valid=false` where the source logged one (JudgeActs runs),
  else the raw text (stripped, one Markdown code fence removed) does not parse as
  JSON; a runtime failure without text is not counted;
- seconds_median, seconds_mean: per call, over calls with recorded seconds;
- timed_prompts: prompts with seconds recorded for every order 0..K−1; over them,
  prompt_seconds_one_order = mean seconds of the order-0 call, prompt_seconds_all_orders
  = mean of the seconds summed over the K orders, all_over_one = their ratio
  (below K when order 0 carries warm-up outliers), hours_one_order and
  hours_all_orders = the summed seconds / 3600.

`gate_cost` lists what each policy needing more than its judge's order-0 call costs per prompt, read
from the policies' cost columns (`audit_core.selection.costs`, the one place a policy's cost is defined).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

# The columns of `store.load_calls` that `timing_table` reads.
TIMING_CALL_COLUMNS = ("judge", "prompt_id", "order_index", "status", "raw_output", "parse_note", "seconds")
# The columns of the calls that carry text, which `timing_table_from_arrays` reads (`store.load_call_texts`).
TEXT_COLUMNS = ("judge", "raw_output", "parse_note")

TIMING_COLUMNS = [
    "judge", "orders", "calls", "valid", "recovered", "failed", "not_json",
    "seconds_median", "seconds_mean", "timed_prompts", "prompt_seconds_one_order",
    "prompt_seconds_all_orders", "all_over_one", "hours_one_order", "hours_all_orders",
]

GATE_COST_COLUMNS = ["policy", "base_judge", "partner", "kind", "coverage", "judge_calls", "seconds_per_prompt",
                     "over_one"]
COSTLY_KINDS = ("majority", "order_gate", "debiased", "judge_gate", "scorer_gate")  # more than one order-0 call

_JSON_FLAG = re.compile(r"\bjson_valid=(true|false)\b")
_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)


def timing_table(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per judge (sorted by name) of the call rows as `store.load_calls` returns them, at most one
    per (judge, prompt, order) (ValueError for a repeated one): `timing_table_from_arrays` of their arrays."""
    statuses, seconds = _call_arrays(calls)
    texts = calls.loc[(calls["raw_output"].notna() | calls["parse_note"].notna()).to_numpy(), list(TEXT_COLUMNS)]
    return timing_table_from_arrays(statuses, seconds, texts)


def timing_table_from_arrays(
    statuses: Mapping[str, np.ndarray], seconds: Mapping[str, np.ndarray], texts: pd.DataFrame
) -> pd.DataFrame:
    """One row per judge of `statuses` (sorted by name); see the module docstring for every column.

    statuses: judge -> (P, K) call status, "" where no call; seconds: judge -> (P, K) the call's seconds,
    NaN where none; texts: the calls that carry text (TEXT_COLUMNS), every other call counting as JSON.
    """
    not_json = not_json_counts(texts)
    rows = [_judge_row(str(judge), statuses[judge], np.asarray(seconds[judge], dtype=float), not_json.get(judge, 0))
            for judge in sorted(statuses)]
    return pd.DataFrame(rows, columns=TIMING_COLUMNS)


def gate_cost(policies: pd.DataFrame) -> pd.DataFrame:
    """Calls and seconds per prompt of every policy that needs more than its judge's order-0 call, against
    that call.

    policies: the audit's policy rows with their cost columns (policy, kind, base_judge, partner, coverage,
    calls_per_prompt, seconds_per_prompt; `audit_core.selection.costs.policy_costs`). One row per policy
    of COSTLY_KINDS (majority, order-agreement gates and debiased policies read their judge's K orders,
    prior-corrected 1 + (K − 1)·f; a cross-judge gate both judges' order 0; a scorer gate one call plus
    an untimed scorer), in the policies' order: judge_calls = calls_per_prompt, seconds_per_prompt as
    given, over_one = seconds_per_prompt / that of the base judge's `{judge}` policy (its order-0 call);
    NaN where either is missing or the order-0 seconds are 0.
    """
    rows = policies[policies["kind"].isin(COSTLY_KINDS)]
    judge_rows = policies[policies["kind"] == "judge"]
    one = pd.Series(judge_rows["seconds_per_prompt"].to_numpy(dtype=float), index=judge_rows["policy"].to_numpy())
    base = rows["base_judge"].map(one).to_numpy(dtype=float)
    seconds = rows["seconds_per_prompt"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        over_one = np.where(base > 0, seconds / base, np.nan)
    return pd.DataFrame({
        "policy": rows["policy"].to_numpy(), "base_judge": rows["base_judge"].to_numpy(),
        "partner": rows["partner"].to_numpy(), "kind": rows["kind"].to_numpy(), "coverage": rows["coverage"].to_numpy(),
        "judge_calls": rows["calls_per_prompt"].to_numpy(dtype=float), "seconds_per_prompt": seconds,
        "over_one": over_one,
    }, columns=GATE_COST_COLUMNS)


def is_not_json(raw: object, note: object) -> bool:
    """True when a call's output is not JSON at all (see the module docstring)."""
    flag = _JSON_FLAG.search(note) if isinstance(note, str) else None
    if flag is not None:
        return flag.group(1) == "false"
    if not isinstance(raw, str):
        return False
    text = raw.strip()
    fenced = _FENCE.match(text)
    try:
        json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError:
        return True
    return False


def _call_arrays(calls: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(judge -> (P, K) status, "" where no call; judge -> (P, K) seconds, NaN where none) of the call rows,
    rows the judge's prompts sorted by id, K its largest order index + 1; ValueError for a repeated
    (judge, prompt, order)."""
    statuses, seconds = {}, {}
    for judge, part in calls.groupby("judge", sort=True, observed=True):
        rows, prompts = pd.factorize(part["prompt_id"], sort=True)
        orders = part["order_index"].to_numpy(dtype=np.int64)
        k = int(orders.max()) + 1
        if len(np.unique(rows * k + orders)) < len(part):
            raise ValueError(f"timing_table: judge {judge!r} has more than one call for a (prompt, order)")
        status = np.full((len(prompts), k), "", dtype=object)
        status[rows, orders] = part["status"].to_numpy(dtype=object)
        second = np.full((len(prompts), k), np.nan)
        second[rows, orders] = part["seconds"].to_numpy(dtype=float, na_value=np.nan)
        statuses[str(judge)], seconds[str(judge)] = status, second
    return statuses, seconds


def not_json_counts(texts: pd.DataFrame) -> dict[str, int]:
    """Judge -> how many of its text rows `is_not_json` (judges without one are left out)."""
    flags = [is_not_json(raw, note) for raw, note in zip(texts["raw_output"], texts["parse_note"])]
    counts = pd.Series(flags, dtype=bool).groupby(texts["judge"].astype(str).to_numpy()).sum()
    return {str(judge): int(n) for judge, n in counts.items()}


def _judge_row(judge: str, status: np.ndarray, seconds: np.ndarray, not_json: int) -> dict[str, object]:
    """The judge's timing row from its (P, K) statuses and seconds and its count of not-JSON outputs."""
    timed_seconds = seconds[~np.isnan(seconds)]
    return timing_row(judge, call_sums(status, seconds),
                      float(np.median(timed_seconds)) if len(timed_seconds) else np.nan, not_json)


def call_sums(status: np.ndarray, seconds: np.ndarray) -> dict[str, int | float]:
    """What a judge's timing row is made of, from its (P, K) statuses and seconds (`timing_row`): orders
    (K), counts (calls, valid, recovered, failed, timed_calls: calls with seconds, timed_prompts) and sums
    (seconds_sum over the timed calls; one_order_sum and all_orders_sum over the timed prompts, of the
    order-0 seconds and of the seconds summed over the K orders). Of prompts held apart, the counts and
    sums add and orders is the largest (`call_summaries.TimingSummary`)."""
    timed = seconds[~np.isnan(seconds).any(axis=1)]  # prompts timed in every order
    timed_seconds = seconds[~np.isnan(seconds)]
    return {
        "orders": status.shape[1],
        "calls": int((status != "").sum()),
        "valid": int((status == "ok").sum()),
        "recovered": int((status == "recovered").sum()),
        "failed": int(np.isin(status, ["parse_fail", "runtime_fail"]).sum()),
        "timed_calls": len(timed_seconds),
        "seconds_sum": float(timed_seconds.sum()),
        "timed_prompts": len(timed),
        "one_order_sum": float(timed[:, 0].sum()),
        "all_orders_sum": float(timed.sum(axis=1).sum()),
    }


def timing_row(judge: str, sums: Mapping[str, int | float], seconds_median: float, not_json: int
               ) -> dict[str, object]:
    """The judge's timing row (TIMING_COLUMNS) from its `call_sums`, the median of its timed calls' seconds
    (NaN without one) and its count of not-JSON outputs; each mean is its sum over its count (the same
    float as numpy's mean of the values when the sum is numpy's sum of them)."""
    n, timed = sums["timed_calls"], sums["timed_prompts"]
    one, every = sums["one_order_sum"], sums["all_orders_sum"]
    return {
        "judge": judge,
        "orders": sums["orders"],
        "calls": sums["calls"],
        "valid": sums["valid"],
        "recovered": sums["recovered"],
        "failed": sums["failed"],
        "not_json": not_json,
        "seconds_median": seconds_median,
        "seconds_mean": sums["seconds_sum"] / n if n else np.nan,
        "timed_prompts": timed,
        "prompt_seconds_one_order": one / timed if timed else np.nan,
        "prompt_seconds_all_orders": every / timed if timed else np.nan,
        "all_over_one": (every / timed) / (one / timed) if timed and one / timed > 0 else np.nan,
        "hours_one_order": one / 3600,
        "hours_all_orders": every / 3600,
    }
