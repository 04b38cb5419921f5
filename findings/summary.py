"""The audit's headline numbers as one Markdown document: `runners.analyze`'s report.md.

`findings_markdown` turns a `SelectionAudit` into a document a person can paste elsewhere. It
states numbers and what their intervals include, never more: a gain whose interval contains 0 is
reported as such, not as an improvement. The judge paragraphs, worst-country and cultural rows
are the HTML report's (`findings.selection`); cells are plain text, escaped by `markdown_table`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pandas as pd

from audit_core.selection.audit import SelectionAudit
from audit_core.user_text import escape_markdown
from findings.blocks import markdown_table
from findings.numbers import estimate_of, interval, number, percent, zero_reading
from findings.selection import (
    CULTURAL_HEADER,
    WORST_COUNTRY_HEADER,
    cultural_rows,
    judge_paragraph,
    worst_country_rows,
)

_SIMULATED = re.compile(r"\bsimulated\b", re.IGNORECASE)
TABLE_KINDS = ("random", "oracle", "judge", "majority", "debiased", "order_gate", "order_gate_rejected",
               "judge_gate", "judge_gate_rejected", "scorer", "scorer_gate", "scorer_gate_rejected")


def source_note(row: Mapping[str, object]) -> str:
    """One line describing a `datasets` row: source, revision and notes.

    Starts with "SIMULATED:" when the source is the built-in demo and the notes do
    not already say simulated, so `findings_markdown` marks such a report.
    """
    parts = [f"source {row.get('source') or 'unknown'}"]
    for key, label in (("source_revision", "revision "), ("notes", "")):
        value = row.get(key)
        if value is not None and not pd.isna(value) and str(value):
            parts.append(f"{label}{value}")
    text = "; ".join(parts)
    return f"SIMULATED: {text}" if row.get("source") == "demo" and not _SIMULATED.search(text) else text


POLICY_HEADER = ("policy", "n", "coverage", "gain [95% CI]", "regret [95% CI]", "BMR vs random")


def _policy_rows(policies: pd.DataFrame, kinds: Sequence[str] = TABLE_KINDS) -> list[list[str]]:
    """Per policy of `kinds`: n, coverage, gain and regret with their intervals, BMR next to random's."""
    return [[str(r["policy"]), str(int(r["n"])), percent(r["coverage"]), estimate_of(r, "gain", True),
             number(r["regret"]) + interval(r["regret_lo"], r["regret_hi"]), f"{percent(r['bmr'])} vs {percent(r['bmr_random'])}"]
            for r in policies[policies["kind"].isin(kinds)].to_dict("records")]


GATE_HEADER = ("gate", "kept n (coverage)", "kept gain [95% CI]", "ungated gain on kept", "rejected n (coverage)",
               "rejected gain [95% CI]", "kept − rejected [95% CI]", "reading")


def _gate_rows(gates: pd.DataFrame, policies: pd.DataFrame) -> list[list[str]]:
    """Per gate: kept and rejected sides, the ungated judge on the kept prompts, and the kept
    minus rejected gain with its joint interval (all prompts resampled together)."""
    by_name = policies.set_index("policy")
    rows = []
    for gate, part in gates.groupby("gate", sort=False):
        kept, rej = (part.set_index("side").loc[side] for side in ("kept", "rejected"))
        diff = by_name.loc[gate]
        lo, hi = diff["gain_vs_rejected_lo"], diff["gain_vs_rejected_hi"]
        if int(kept["n"]) == 0 or int(rej["n"]) == 0:
            reading = "keeps nothing" if int(kept["n"]) == 0 else "rejects nothing"
        else:
            reading = zero_reading(lo, hi, "kept above rejected", "kept below rejected")
        rows.append([str(gate), f"{int(kept['n'])} ({percent(kept['coverage'])})", estimate_of(kept, "gain", True),
                     number(kept["ungated_gain"], True), f"{int(rej['n'])} ({percent(rej['coverage'])})", estimate_of(rej, "gain", True),
                     number(diff["gain_vs_rejected"], True) + interval(lo, hi, signed=True), reading])
    return rows


def _slice_section(result: SelectionAudit) -> list[str]:
    """Lines of the slices section: per slice (all but `all`), each judge's order-0 gain per value."""
    judges = list(result.judges["judge"])
    if not judges:
        return []
    rows = result.slices[result.slices["policy"].isin(judges)].set_index(["slice", "value", "policy"])
    out = ["## Slices", "", "Each judge's order-0 gain over random within each value of a prompt attribute, its interval "
           "resampling the judge's prompts within that value; n = prompts acted on (a value with none has no gain, "
           "not zero). Every policy is in slices.csv.", ""]
    body = []
    for name, values in result.slice_prompts.items():
        if name == "all":
            continue
        for value, prompts in values.items():
            cells = []
            for judge in judges:
                r = rows.loc[(name, value, judge)]
                cells.append(f"{number(r['gain'], True)}{interval(r['gain_lo'], r['gain_hi'], signed=True)} (n {int(r['n'])})")
            body.append([str(name), str(value), str(prompts), *cells])
    return [*out, *markdown_table(["slice", "value", "prompts", *(f"{j} gain [95% CI]" for j in judges)], body), ""]


def _timing_section(timing: pd.DataFrame | None) -> list[str]:
    """Lines of the output-validity and timing section (none until a timing table is attached)."""
    if timing is None or timing.empty:
        return []
    body = [[str(r["judge"]), str(int(r["calls"])), str(int(r["valid"])), str(int(r["recovered"])),
             str(int(r["failed"])), str(int(r["not_json"])), number(r["seconds_median"]), number(r["prompt_seconds_one_order"]),
             number(r["prompt_seconds_all_orders"]), number(r["hours_all_orders"])] for r in timing.to_dict("records")]
    return ["## Output validity and timing", "",
            "valid: accepted by the strict parser; recovered: by the lenient one; not JSON: not JSON at all. "
            "Seconds as recorded with every call.", "",
            *markdown_table(["judge", "calls", "valid", "recovered", "failed", "not JSON", "median s per call",
                     "s per prompt, one order", "s per prompt, all orders", "hours, all orders"], body), ""]


def findings_markdown(result: SelectionAudit, *, dataset: str, source_note: str | None = None) -> str:
    """The audit's findings as Markdown: provenance, per-judge headlines, policies, gates,
    worst country per judge, every judge's gain per slice, output validity and timing (when
    the result carries it) and cultural-error deltas whose intervals exclude 0.

    A `source_note` containing the word "simulated" (any case) puts a SIMULATED
    warning at the top; without a note no source line is written. Pure: no I/O.
    """
    e = escape_markdown
    policies = result.policies
    prompts = int(policies.loc[policies["kind"] == "random", "n"].iloc[0])
    out = [f"# Judge audit findings: {e(dataset)}", ""]
    if source_note is not None:
        out += [f"> **SIMULATED data** — not real model or human data. Source: {e(source_note)}"
                if _SIMULATED.search(source_note) else f"Source: {e(source_note)}", ""]
    settings = result.resampling
    intervals = (f"95% percentile intervals from {settings.resamples:,} prompt-level bootstrap resamples "
                 f"(seed {settings.seed})" if settings.resamples else "no bootstrap intervals (0 resamples)")
    out += [f"{prompts} prompts; {intervals}; below-mean rates of deterministic policies carry Wilson intervals. "
            "Gain = picked image's mean alignment minus the pool mean (exact random choice); regret = best in pool "
            "minus picked; below-mean rate (BMR) next to random's matched rate on the same prompts.", "", "## Judges", ""]
    if result.judges.empty:
        out += ["No selector judge is recorded on this dataset; only random, the oracle and content scorers are audited.", ""]
    order0 = policies[policies["kind"] == "judge"].set_index("policy")
    for judge in result.judges.to_dict("records"):
        out += [f"### {e(judge['judge'])}", "", judge_paragraph(judge, order0.loc[judge["judge"]], prompts), ""]

    out += ["## Policies", "", *markdown_table(POLICY_HEADER, _policy_rows(policies)),
            "", "## Gates: kept vs rejected", ""]
    if result.gates.empty:
        out += ["No gate can be formed: it needs several orders, several judges or a scorer.", ""]
    else:
        out += ["Gain over random on the prompts each gate keeps (next to the ungated judge's order-0 pick on the same "
                "prompts) and on the prompts it rejects (where the ungated judge is what users get); the difference "
                "kept − rejected resamples all prompts jointly.", "",
                *markdown_table(GATE_HEADER, _gate_rows(result.gates, policies)), ""]

    if not result.judges.empty:
        out += ["## Worst country per judge", "",
                "Country with the highest mean regret of each judge's order-0 pick; a country where the judge returned "
                "nothing has zero coverage and undefined (not zero) regret.", "",
                *markdown_table(WORST_COUNTRY_HEADER, worst_country_rows(result)), ""]

    out += _slice_section(result)
    out += _timing_section(result.timing)
    out += ["## Cultural errors", ""]
    cultural = cultural_rows(result.cultural)
    if cultural is None:
        out += ["The dataset has no cultural-error ratings, or no judge or scorer to compare."]
    elif not cultural:
        out += ["No cultural-error delta of a judge, majority vote or scorer has an interval excluding 0."]
    else:
        out += ["Error rate of the chosen image minus random's on the same prompts (negative = fewer errors), where the "
                "interval excludes 0 (Bonferroni-adjusted over the three error types when available). Sensitive pools: "
                "candidates differ in that error. Gates' deltas are in cultural.csv.", "",
                *markdown_table(CULTURAL_HEADER, cultural)]
    return "\n".join(out).rstrip() + "\n"
