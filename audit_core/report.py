"""Exportable findings: the audit's headline numbers as a Markdown report.

`findings_markdown` turns an `SelectionAudit` into a document a person can paste
elsewhere. It states numbers and what their intervals include, never more: a
gain whose interval contains 0 is reported as such, not as an improvement.

The row builders (`policy_rows`, `gate_rows`, `worst_country_rows`, `cultural_rows`,
`slice_rows`, `timing_rows`, `judge_paragraph`) return plain text, shared with the
HTML report (`findings.selection`); only `markdown_table` and the headings escape it,
with `escape_markdown`: a character is escaped only where Markdown (CommonMark, GFM
and Streamlit's extensions `:emoji:`, `:red[..]`, `$..$`) would read it as syntax,
so a judge named `*x*` or `<script>` renders literally and ordinary text keeps no backslashes.

Data text is also made `visible` before it is rendered anywhere (Markdown here, HTML by
`escape_html`, figures by `findings.figures.plain`, the app's plain-text elements): a
direction override, isolate or mark, or another invisible control, becomes a visible
marker such as `⟨U+202E⟩`, so a name can neither reorder the numbers beside it nor hide text.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from audit_core.selection.audit import SelectionAudit
from audit_core.store.schema import ERROR_OUTCOMES

# (pattern, what it protects): each match gets a backslash before its first character
_INLINE = re.compile(
    r"[\\`*~$|^]"             # code, emphasis, strikethrough, LaTeX, table cells, superscript: anywhere
    r"|(?<![^\W_])_|_(?![^\W_])"  # emphasis by underscore: never between two letters or digits
    r"|\](?=[(\[:])"             # a link, reference or link definition: `](`, `][`, `]:`
    r"|<(?=[A-Za-z/!?])"         # raw HTML, comments, autolinks
    r"|&(?=#?[A-Za-z0-9]+;)"     # character references (&amp;)
    r"|:(?=[A-Za-z])"            # Streamlit's :emoji: shortcodes and :colour[text] directives
)
_LINE_START = re.compile(r"^(?:([#>+=-])|(\d+)([.)]))")  # headings, quotes, lists, setext lines
_SIMULATED = re.compile(r"\bsimulated\b", re.IGNORECASE)
# Joiners shape Arabic, Indic and emoji text and reorder nothing: they stay as written.
_JOINERS = frozenset("\u200c\u200d")
_UNSEEN_CATEGORIES = frozenset(("Cf", "Cc", "Zl", "Zp"))  # format and control characters, line and paragraph separators
TABLE_KINDS = ("random", "oracle", "judge", "majority", "order_gate", "order_gate_rejected", "judge_gate",
               "judge_gate_rejected", "scorer", "scorer_gate", "scorer_gate_rejected")
CULTURAL_KINDS = ("judge", "majority", "scorer")


def _marker(char: str) -> str:
    return f"⟨U+{ord(char):04X}⟩"


def unseen(char: str) -> bool:
    """Whether `char` is invisible or steers the text around it: a format character (Unicode
    category Cf: the bidi overrides, embeddings, isolates and marks U+202A–U+202E, U+2066–U+2069,
    U+200E, U+200F, U+061C, zero-width spaces, tags...) other than the two joiners, a control
    character other than tab and line breaks, or a line or paragraph separator."""
    return (unicodedata.category(char) in _UNSEEN_CATEGORIES and char not in _JOINERS
            and char not in "\t\n\r")


def visible(text: object) -> str:
    """`str(text)` with every `unseen` character replaced by a visible marker, `⟨U+202E⟩` for
    U+202E: the one rule for data text in the app, the reports and the figures. Tabs and line
    breaks are left to each renderer; everything else is unchanged."""
    out = str(text)
    if out.isascii() and out.isprintable():  # the common case: nothing to mark
        return out
    return "".join(_marker(c) if unseen(c) else c for c in out)


def escape_html(text: object) -> str:
    """`text` made `visible` and escaped for HTML (element text and quoted attribute values)."""
    return html.escape(visible(text))


def escape_markdown(text: object, line_start: bool = False) -> str:
    """`text` made `visible`, as Markdown that renders literally, on one line (line breaks become spaces).

    Escapes only what Markdown would misread (see the module docstring): `*`, `` ` ``, `~`,
    `$`, `|`, `^` and `\\` anywhere; `_` unless between letters or digits; `]` before `(`,
    `[` or `:`; `<` before a tag; `&` of an entity; `:` before a letter; a trailing `#`. With
    `line_start` (a paragraph's text), also a leading block marker (`#`, `>`, `-`, `+`, `=`, `1.`).
    """
    out = visible(str(text).replace("\r", " ").replace("\n", " "))
    out = _INLINE.sub(lambda m: "\\" + m.group(0), out.lstrip() if line_start else out)
    out = re.sub(r"(\s)(#+\s*)$", lambda m: m.group(1) + "\\" + m.group(2), out)  # a heading's closing sequence
    if line_start:  # leading blanks are dropped: four of them would start a code block
        out = _LINE_START.sub(lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\" + m.group(3), out, count=1)
    return out


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


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def number(value: object, signed: bool = False) -> str:
    return "—" if _missing(value) else f"{float(value):+.3f}" if signed else f"{float(value):.3f}"


def percent(value: object) -> str:
    return "—" if _missing(value) else f"{float(value):.0%}"


def interval(lo: object, hi: object, fmt: Callable[..., str] = number, **kw: bool) -> str:
    """" [lo, hi]" with the value's format, or "" without an interval."""
    return "" if _missing(lo) or _missing(hi) else f" [{fmt(lo, **kw)}, {fmt(hi, **kw)}]"


def zero_reading(lo: object, hi: object, above: str, below: str) -> str:
    """What a 95% interval says about 0, in words."""
    if _missing(lo) or _missing(hi):
        return "no interval"
    side = above if float(lo) > 0 else below if float(hi) < 0 else None
    return f"interval excludes 0: {side}" if side else "interval includes 0"


def markdown_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    """Lines of a GFM table of plain-text cells (each escaped here)."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(escape_markdown(c) for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]



def judge_paragraph(judge: Mapping[str, object], p: Mapping[str, object], prompts: int) -> str:
    """The headline sentences of one selector judge (its summary row and order-0 policy row)."""
    calls, parse_fail = int(judge["calls"]), int(judge["parse_fail"])
    share = f" ({parse_fail / calls:.1%} of calls)" if calls else ""
    status = (f"Calls: {calls} recorded, {int(judge['valid'])} valid; parse failures {parse_fail}{share},"
              f" runtime failures {int(judge['runtime_fail'])}, recovered by the lenient parser {int(judge['recovered'])}.")
    if int(p["n"]) == 0:
        return f"The order-0 pick never returned a valid image, so no selection measure is defined. {status}"
    bmr_words = ("more below-mean picks than random", "fewer below-mean picks than random")
    sentences = [
        f"Order-0 pick on {int(p['n'])} of {prompts} prompts ({percent(p['coverage'])} coverage).",
        f"Gain over random {number(p['gain'], True)}{interval(p['gain_lo'], p['gain_hi'], signed=True)}"
        f" ({zero_reading(p['gain_lo'], p['gain_hi'], 'above random', 'below random')});"
        f" regret {number(p['regret'])}{interval(p['regret_lo'], p['regret_hi'])} vs {number(p['random_regret'])} for random.",
        f"Below-mean rate {percent(p['bmr'])}{interval(p['bmr_lo'], p['bmr_hi'], percent)} vs random's matched"
        f" {percent(p['bmr_random'])} (difference: {zero_reading(p['bmr_delta_lo'], p['bmr_delta_hi'], *bmr_words)}).",
    ]
    p_value = judge["chi2_p"]
    if not _missing(p_value):
        shown = "< 1e-300" if float(p_value) == 0 else f"= {float(p_value):.2g}"
        verdict = ("slot shares differ from uniform at the 5% level" if float(p_value) < 0.05
                   else "no evidence at the 5% level that slot shares differ from uniform")
        chi2 = f"χ² = {float(judge['chi2']):.1f} (df {int(judge['chi2_df'])}), p {shown}"
        sentences.append(f"First-slot share {percent(judge['first_slot'])} of valid calls vs"
                         f" {percent(judge['first_slot_uniform'])} under uniform choice; {chi2}: {verdict}.")
    if int(judge["orders"]) < 2:
        sentences.append("One presentation order recorded: order flips are not measured.")
    elif int(judge["flip_n"]):
        sentences.append(f"The returned image changes across the {int(judge['orders'])} orders on {percent(judge['flip_rate'])}"
                         f" of the {int(judge['flip_n'])} prompts where every order parsed.")
    else:
        sentences.append("No prompt parsed in every order, so the flip rate is undefined.")
    return " ".join([*sentences, status])


def gain_text(row: Mapping[str, object]) -> str:
    return number(row["gain"], True) + interval(row["gain_lo"], row["gain_hi"], signed=True)


POLICY_HEADER = ("policy", "n", "coverage", "gain [95% CI]", "regret [95% CI]", "BMR vs random")


def policy_rows(policies: pd.DataFrame, kinds: Sequence[str] = TABLE_KINDS) -> list[list[str]]:
    """Per policy of `kinds`: n, coverage, gain and regret with their intervals, BMR next to random's."""
    return [[str(r["policy"]), str(int(r["n"])), percent(r["coverage"]), gain_text(r),
             number(r["regret"]) + interval(r["regret_lo"], r["regret_hi"]), f"{percent(r['bmr'])} vs {percent(r['bmr_random'])}"]
            for r in policies[policies["kind"].isin(kinds)].to_dict("records")]


GATE_HEADER = ("gate", "kept n (coverage)", "kept gain [95% CI]", "ungated gain on kept", "rejected n (coverage)",
               "rejected gain [95% CI]", "kept − rejected [95% CI]", "reading")


def gate_rows(gates: pd.DataFrame, policies: pd.DataFrame) -> list[list[str]]:
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
        rows.append([str(gate), f"{int(kept['n'])} ({percent(kept['coverage'])})", gain_text(kept),
                     number(kept["ungated_gain"], True), f"{int(rej['n'])} ({percent(rej['coverage'])})", gain_text(rej),
                     number(diff["gain_vs_rejected"], True) + interval(lo, hi, signed=True), reading])
    return rows


WORST_COUNTRY_HEADER = ("judge", "worst country", "regret [95% CI]", "random, same prompts", "acted on (coverage)",
                        "countries covered")


def worst_country_rows(result: SelectionAudit) -> list[list[str]]:
    """Per judge: the covered country with the highest regret of the order-0 pick."""
    rows = []
    for name in result.judges["judge"]:
        groups = result.groups[result.groups["policy"] == name]
        covered = groups[groups["n"] > 0]
        if covered.empty:
            rows.append([str(name), "—", "—", "—", "—", f"0 of {len(groups)}"])
            continue
        w = covered.loc[covered["regret"].idxmax()]
        # random's regret on the same prompts is h* − h̄ = gain + regret
        rows.append([str(name), str(w["country"]),
                     number(w["regret"]) + interval(w["regret_lo"], w["regret_hi"]), number(w["regret"] + w["gain"]),
                     f"{int(w['n'])} of {int(w['prompts'])} ({percent(w['coverage'])})", f"{len(covered)} of {len(groups)}"])
    return rows


CULTURAL_HEADER = ("policy", "error", "pools", "n", "delta", "95% CI", "Bonferroni CI", "reading")


def cultural_rows(cultural: pd.DataFrame) -> list[list[str]] | None:
    """Error deltas of judges, majority votes and scorers whose interval excludes 0 (the
    Bonferroni interval where there is one); None when there is no error delta at all."""
    errors = cultural[cultural["outcome"].isin(ERROR_OUTCOMES) & cultural["kind"].isin(CULTURAL_KINDS)]
    if errors.empty:
        return None
    bonf = errors["delta_lo_bonf"].notna() & errors["delta_hi_bonf"].notna()
    lo, hi = errors["delta_lo_bonf"].where(bonf, errors["delta_lo"]), errors["delta_hi_bonf"].where(bonf, errors["delta_hi"])
    return [[str(r["policy"]), r["outcome"].replace("_", " "), r["subset"], str(int(r["n"])),
             number(r["delta"], True), interval(r["delta_lo"], r["delta_hi"], signed=True).strip() or "—",
             interval(r["delta_lo_bonf"], r["delta_hi_bonf"], signed=True).strip() or "—",
             "fewer errors than random" if r["delta"] < 0 else "more errors than random"]
            for r in errors[(lo > 0) | (hi < 0)].to_dict("records")]


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
    intervals = (f"95% percentile intervals from {result.resamples:,} prompt-level bootstrap resamples (seed {result.seed})"
                 if result.resamples else "no bootstrap intervals (0 resamples)")
    out += [f"{prompts} prompts; {intervals}; below-mean rates of deterministic policies carry Wilson intervals. "
            "Gain = picked image's mean alignment minus the pool mean (exact random choice); regret = best in pool "
            "minus picked; below-mean rate (BMR) next to random's matched rate on the same prompts.", "", "## Judges", ""]
    if result.judges.empty:
        out += ["No selector judge is recorded on this dataset; only random, the oracle and content scorers are audited.", ""]
    order0 = policies[policies["kind"] == "judge"].set_index("policy")
    for judge in result.judges.to_dict("records"):
        out += [f"### {e(judge['judge'])}", "", judge_paragraph(judge, order0.loc[judge["judge"]], prompts), ""]

    out += ["## Policies", "", *markdown_table(POLICY_HEADER, policy_rows(policies)),
            "", "## Gates: kept vs rejected", ""]
    if result.gates.empty:
        out += ["No gate can be formed: it needs several orders, several judges or a scorer.", ""]
    else:
        out += ["Gain over random on the prompts each gate keeps (next to the ungated judge's order-0 pick on the same "
                "prompts) and on the prompts it rejects (where the ungated judge is what users get); the difference "
                "kept − rejected resamples all prompts jointly.", "",
                *markdown_table(GATE_HEADER, gate_rows(result.gates, policies)), ""]

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
