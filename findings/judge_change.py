"""A judge change (`audit_core.selection.judge_change`) as the app and the report show it.

The paired differences candidate − baseline as a forest chart (`difference_chart`: one row per
measure × policy, the point with its joint 95% interval, 0 dashed), the prompts where the two
judges' order-0 picks differ in a sentence, the verdict rule in words (from `VerdictRule`'s
fields, so a changed rule reads as it is) and the verdicts as a table. The report's "Judge change"
section (`judge_change`) compares the first two selector judges of the dataset, in the order the
audit lists them, with the report's resamples and seed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from audit_core.selection.judge_change import (
    DISCARDS,
    FILTERS,
    KEEPS_NOTHING,
    NO_EVIDENCE,
    REJECTS_NOTHING,
    JudgeChange,
    VerdictRule,
    compare_judges,
    pair_judges,
)
from findings import colours, figures
from findings.blocks import Figure, Paragraph, Section, Table
from findings.inputs import ReportInput
from findings.numbers import count, estimate, estimate_of, percent

MEASURE_NAMES = {
    "gain": "gain", "regret": "regret", "bmr": "below-mean rate", "best": "best rate",
    "stereotype_delta": "stereotype delta", "missing_explicit_delta": "missing explicit delta",
    "missing_implicit_delta": "missing implicit delta", "first_slot": "first-slot share", "flip_rate": "flip rate",
}
DEFAULT_MEASURES = ("gain", "regret", "bmr", "best")
ALL_ORDERS = "all orders"  # the policy of judge-level measures (first-slot share, flip rate)
VERDICT_HEADER = ("gate", "judge", "coverage", "kept gain [95% CI]", "rejected gain [95% CI]",
                  "kept − rejected gain [95% CI]", "verdict")
_ORDERS_GATE = re.compile(r"orders>=(\d+)/(\d+)")


def measure_name(measure: str) -> str:
    """A compare.csv measure in words ("bmr" -> "below-mean rate")."""
    return MEASURE_NAMES.get(measure, measure.replace("_", " "))


def unanimity_gate(change: JudgeChange) -> str | None:
    """The label of the gate that needs every order to agree (`orders>=K/K`), None when both judges
    do not have the same orders."""
    return next((g for g in change.gate_labels if (m := _ORDERS_GATE.fullmatch(g)) and m[1] == m[2]), None)


def default_policies(change: JudgeChange) -> list[str]:
    """The policies a chart shows unless others are chosen: order 0, majority, the unanimity gate's
    kept side (when there is one) and `all orders` (where first-slot share and flip rate live)."""
    gate = unanimity_gate(change)
    return ["order0", "majority", *([gate] if gate else []), ALL_ORDERS]


def chart_rows(compare: pd.DataFrame, measures: Sequence[str], policies: Sequence[str]) -> pd.DataFrame:
    """The compare rows of `measures` × `policies` that have a difference, in the order of
    `measures`, then of `policies`."""
    rows = compare[compare["measure"].isin(measures) & compare["policy"].isin(policies)].dropna(subset=["difference"])
    rank = {m: k for k, m in enumerate(measures)}, {p: k for k, p in enumerate(policies)}
    order = sorted(rows.index, key=lambda i: (rank[0][rows.at[i, "measure"]], rank[1][rows.at[i, "policy"]]))
    return rows.loc[order]


def difference_chart(change: JudgeChange, measures: Sequence[str], policies: Sequence[str], colour: str) -> go.Figure:
    """Candidate − baseline of each measure × policy (`chart_rows`) as a point with its joint 95%
    interval, labelled "measure · policy (n prompts)", top to bottom in that order, in `colour` (the
    candidate's); each judge's mean and the prompts on hover; 0 (no change) dashed."""
    rows = chart_rows(change.compare, measures, policies)
    labels = [f"{measure_name(m)} · {figures.plain(p)} (n {count(n)})"
              for m, p, n in zip(rows["measure"], rows["policy"], rows["n"])]
    fig = go.Figure(go.Scatter(
        x=rows["difference"], y=labels, mode="markers", name="candidate − baseline", showlegend=False,
        marker={"size": 11, "color": colour},
        error_x={"type": "data", "symmetric": False,
                 "array": (rows["difference_hi"] - rows["difference"]).clip(lower=0),
                 "arrayminus": (rows["difference"] - rows["difference_lo"]).clip(lower=0)},
        customdata=rows[["baseline", "candidate", "n"]].to_numpy(),
        hovertemplate="%{y}: %{x:+.3f} (baseline %{customdata[0]:.3f}, candidate %{customdata[1]:.3f}, "
                      "%{customdata[2]} prompts)<extra></extra>",
    ))
    fig.add_vline(x=0, line_dash="dash", line_color=colours.RANDOM, annotation_text="no change",
                  annotation_position="top")
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    return figures.layout(fig, "Paired differences, candidate − baseline",
                          f"{figures.plain(change.candidate)} − {figures.plain(change.baseline)} "
                          "(prompts both act on, joint 95% interval)", "", height=max(300, 30 * len(rows) + 140))


def picks_differ(change: JudgeChange) -> str:
    """The prompts where the two judges' order-0 picks differ, and each judge's gain there, in a sentence."""
    split, base, cand = change.disagreement, change.baseline, change.candidate
    if split.n == 0:
        return (f"The order-0 picks of {base} and {cand} are the same image on all {count(split.both)} prompts "
                "both picked on.")
    return (f"The order-0 picks of {base} and {cand} differ on {count(split.n)} of the {count(split.both)} prompts "
            f"both picked on. There, {base}'s gain over random is {estimate(*split.baseline_gain, signed=True)} and "
            f"{cand}'s {estimate(*split.candidate_gain, signed=True)}, a difference of "
            f"{estimate(*split.difference, signed=True)} (95% intervals).")


def _threshold(value: float) -> str:
    # a rule's threshold exactly as set (not rounded to three decimals), so the words state the rule applied
    return f"{value + 0.0:g}"


def rule_in_words(rule: VerdictRule) -> str:
    """The verdict rule with its thresholds, in words."""
    return (f"Each gate gets a verdict per judge, by the first rule that applies (gain over random: 0 is random "
            f"choice): \"{KEEPS_NOTHING}\" when it keeps no prompt, \"{REJECTS_NOTHING}\" when it rejects none; "
            f"\"{FILTERS}\" when the lower end of the 95% interval of the rejected side's gain is at most "
            f"{_threshold(rule.filters_rejected_lo_at_most)} and the lower end of kept − rejected gain is above "
            f"{_threshold(rule.filters_kept_minus_rejected_lo_above)}; \"{DISCARDS}\" when the lower end of the "
            f"rejected side's gain is above {_threshold(rule.discards_rejected_lo_above)}; otherwise, or when an "
            f"interval is undefined, \"{NO_EVIDENCE}\".")


def verdict_rows(change: JudgeChange) -> list[list[str]]:
    """Per gate and judge (baseline first): coverage, kept and rejected gain, kept − rejected gain, the verdict."""
    return [[str(r["gate"]), f"{r['judge']} ({r['role']})", percent(r["coverage"]), estimate_of(r, "kept_gain", True),
             estimate_of(r, "rejected_gain", True), estimate_of(r, "kept_minus_rejected", True), str(r["verdict"])]
            for r in change.gates.to_dict("records")]


CHART_CAPTION = ("Candidate minus baseline on the prompts both act on, each point with its 95% interval from one "
                 "joint prompt-level bootstrap (both judges' values of a prompt drawn together); 0: no change. "
                 "Regret and below-mean rate are better lower, gain and best rate higher.")
VERDICT_CAPTION = ("Each gate applied to each judge: coverage (share of all prompts kept), gain over random of the "
                   "gate's pick where it keeps and of the judge's order-0 pick where it rejects (95% intervals over "
                   "each side's prompts), and kept − rejected gain (all prompts resampled jointly).")


# ------------------------------------------------------------ the report's section


def applies(report: ReportInput) -> bool:
    """Whether the report has a judge change to show: a selection audit with two or more selector judges."""
    return report.result is not None and len(report.data.judges) >= 2


def judge_change(report: ReportInput) -> Section:
    """The first two selector judges compared (baseline the first): the paired differences, the
    prompts where their picks differ, and the gate verdicts with the rule."""
    judges = list(report.result.judges["judge"])
    change = compare_judges(pair_judges(report.data, judges[0], judges[1]), resampling=report.result.resampling)
    others = (f" The dataset has {len(judges)} selector judges; compare any other pair with "
              "python -m runners.compare (docs/judge-change.md).") if len(judges) > 2 else ""
    colour = report.colours.get(change.candidate, colours.RANDOM)
    return Section("judge_change", "Judge change", [
        Paragraph(f"Would swapping {change.baseline} (baseline) for {change.candidate} (candidate) change the picks, "
                  "and do the gates still do their job? A gate validated for one judge is not validated for the "
                  f"next.{others}"),
        Figure("judge_change", difference_chart(change, DEFAULT_MEASURES, default_policies(change), colour),
               CHART_CAPTION),
        Paragraph(picks_differ(change)),
        Paragraph(rule_in_words(change.rule)),
        Table(VERDICT_HEADER, verdict_rows(change), VERDICT_CAPTION),
    ])


BUILDERS = (judge_change,)
