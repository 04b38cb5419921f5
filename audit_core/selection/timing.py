"""Output validity and cost per judge, from the recorded calls and their seconds.

Input: the call rows as `store.load_calls` returns them (judge, prompt_id,
order_index, status, raw_output, parse_note, seconds, ...). One row per judge:

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

import numpy as np
import pandas as pd

# The columns of `store.load_calls` that `timing_table` reads.
TIMING_CALL_COLUMNS = ("judge", "prompt_id", "order_index", "status", "raw_output", "parse_note", "seconds")

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
    """One row per judge (sorted by name); see the module docstring for every column."""
    rows = [_judge_row(str(judge), part) for judge, part in calls.groupby("judge", sort=True)]
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


def _judge_row(judge: str, part: pd.DataFrame) -> dict[str, object]:
    status = part["status"].to_numpy()
    seconds = part["seconds"].to_numpy(dtype=float)
    k = int(part["order_index"].max()) + 1
    timed = (part.dropna(subset=["seconds"]).pivot(index="prompt_id", columns="order_index", values="seconds")
             .reindex(columns=range(k)))
    timed = timed[timed.notna().all(axis=1)]
    one, every = timed[0].to_numpy(dtype=float), timed.sum(axis=1).to_numpy(dtype=float)
    timed_seconds = seconds[~np.isnan(seconds)]
    texts = (part["raw_output"].notna() | part["parse_note"].notna()).to_numpy()  # is_not_json is False without either
    return {
        "judge": judge,
        "orders": k,
        "calls": len(part),
        "valid": int((status == "ok").sum()),
        "recovered": int((status == "recovered").sum()),
        "failed": int(np.isin(status, ["parse_fail", "runtime_fail"]).sum()),
        "not_json": int(sum(is_not_json(raw, note) for raw, note in zip(part["raw_output"][texts],
                                                                        part["parse_note"][texts]))),
        "seconds_median": float(np.median(timed_seconds)) if len(timed_seconds) else np.nan,
        "seconds_mean": float(timed_seconds.mean()) if len(timed_seconds) else np.nan,
        "timed_prompts": len(timed),
        "prompt_seconds_one_order": float(one.mean()) if len(one) else np.nan,
        "prompt_seconds_all_orders": float(every.mean()) if len(every) else np.nan,
        "all_over_one": float(every.mean() / one.mean()) if len(one) and one.mean() > 0 else np.nan,
        "hours_one_order": float(one.sum() / 3600),
        "hours_all_orders": float(every.sum() / 3600),
    }
