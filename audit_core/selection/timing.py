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

`gate_cost` turns the judges' seconds into what each multi-call policy costs per prompt.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

TIMING_COLUMNS = [
    "judge", "orders", "calls", "valid", "recovered", "failed", "not_json",
    "seconds_median", "seconds_mean", "timed_prompts", "prompt_seconds_one_order",
    "prompt_seconds_all_orders", "all_over_one", "hours_one_order", "hours_all_orders",
]

GATE_COST_COLUMNS = ["policy", "base_judge", "partner", "kind", "coverage", "judge_calls", "seconds_per_prompt",
                     "over_one"]
ALL_ORDERS_KINDS = ("majority", "order_gate")  # policies that need every order of their judge
PAIR_KINDS = ("judge_gate", "scorer_gate")  # policies that need the order-0 call of their judge and of a partner

_JSON_FLAG = re.compile(r"\bjson_valid=(true|false)\b")
_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)


def timing_table(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per judge (sorted by name); see the module docstring for every column."""
    rows = [_judge_row(str(judge), part) for judge, part in calls.groupby("judge", sort=True)]
    return pd.DataFrame(rows, columns=TIMING_COLUMNS)


def gate_cost(timing: pd.DataFrame, policies: pd.DataFrame) -> pd.DataFrame:
    """Seconds per prompt of every policy that needs more than its judge's order-0 call, against that call.

    timing: `timing_table` rows; policies: the audit's policy rows (policy, kind, base_judge,
    partner, coverage). Majority and order-agreement gates call their judge in all K orders:
    judge_calls = K, seconds_per_prompt = prompt_seconds_all_orders, over_one = all_over_one.
    A cross-judge gate calls both judges once: judge_calls = 2, seconds = the sum of their
    prompt_seconds_one_order, over_one = that / the base judge's. A scorer gate adds the
    scorer to one judge call: judge_calls = 1, and its seconds and ratio are NaN (scorers
    record no seconds). Rows in the policies' order; NaN where a judge has no timed prompts.
    """
    by_judge = timing.set_index("judge")
    one = by_judge["prompt_seconds_one_order"]
    rows = []
    for p in policies[policies["kind"].isin([*ALL_ORDERS_KINDS, *PAIR_KINDS])].itertuples():
        base = one.get(p.base_judge, np.nan)
        if p.kind in ALL_ORDERS_KINDS:
            known = p.base_judge in by_judge.index
            calls = int(by_judge.at[p.base_judge, "orders"]) if known else pd.NA
            seconds = by_judge.at[p.base_judge, "prompt_seconds_all_orders"] if known else np.nan
        elif p.kind == "judge_gate":
            calls, seconds = 2, base + one.get(p.partner, np.nan)
        else:
            calls, seconds = 1, np.nan
        rows.append((p.policy, p.base_judge, p.partner, p.kind, p.coverage, calls, float(seconds),
                     float(seconds / base) if base > 0 else np.nan))
    frame = pd.DataFrame(rows, columns=GATE_COST_COLUMNS)
    frame["judge_calls"] = frame["judge_calls"].astype("Int64")
    return frame


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
    return {
        "judge": judge,
        "orders": k,
        "calls": len(part),
        "valid": int((status == "ok").sum()),
        "recovered": int((status == "recovered").sum()),
        "failed": int(np.isin(status, ["parse_fail", "runtime_fail"]).sum()),
        "not_json": int(sum(is_not_json(raw, note) for raw, note in zip(part["raw_output"], part["parse_note"]))),
        "seconds_median": float(np.median(timed_seconds)) if len(timed_seconds) else np.nan,
        "seconds_mean": float(timed_seconds.mean()) if len(timed_seconds) else np.nan,
        "timed_prompts": len(timed),
        "prompt_seconds_one_order": float(one.mean()) if len(one) else np.nan,
        "prompt_seconds_all_orders": float(every.mean()) if len(every) else np.nan,
        "all_over_one": float(every.mean() / one.mean()) if len(one) and one.mean() > 0 else np.nan,
        "hours_one_order": float(one.sum() / 3600),
        "hours_all_orders": float(every.sum() / 3600),
    }
