"""The report's sections on selector judges (datasets with alignment ratings): headline
estimates, gain against cost, position bias, gates, every policy, countries, cultural errors and the galleries.

Numbers are formatted by `findings.numbers` from the `SelectionAudit` frames, so the report
states exactly what summary.json holds. The judge paragraphs and the worst-country and cultural
rows also serve `findings.summary` (the Markdown summary of `runners.analyze`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from audit_core.selection import galleries, metrics
from audit_core.selection.audit import SelectionAudit
from audit_core.selection.costs import cost_front
from audit_core.store.schema import ERROR_OUTCOMES
from findings import colours, figures
from findings.blocks import Figure, Gallery, Paragraph, PoolCard, Section, Table, Tile
from findings.inputs import ReportInput
from findings.numbers import MISSING, absent, estimate_of, interval, number, p_value, percent, share_of, zero_reading

HEADLINE_KINDS = ("random", "oracle", "judge", "majority", "debiased", "scorer")
HEADLINE_HEADER = ("policy", "prompts", "coverage", "gain [95% CI]", "regret [95% CI]", "below mean [95% CI]",
                   "below mean, random", "picks the best [95% CI]")
GATED_KINDS = ("order_gate", "judge_gate", "scorer_gate", "composed_gate")
CULTURAL_KINDS = ("judge", "majority", "debiased", "scorer")






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
    p = judge["chi2_p"]
    if not absent(p):
        shown = p_value(p)
        verdict = ("slot shares differ from uniform at the 5% level" if float(p) < 0.05
                   else "no evidence at the 5% level that slot shares differ from uniform")
        chi2 = f"χ² = {float(judge['chi2']):.1f} (df {int(judge['chi2_df'])}), p {shown if shown.startswith('<') else '= ' + shown}"
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


def headline_rows(policies: pd.DataFrame, kinds: tuple[str, ...] = HEADLINE_KINDS) -> list[list[str]]:
    """Per policy of `kinds`: prompts, coverage, gain, regret, below-mean and best rates (intervals)."""
    return [[str(r["policy"]), str(int(r["n"])), percent(r["coverage"]), estimate_of(r, "gain", True),
             estimate_of(r, "regret"),
             share_of(r, "bmr"), percent(r["bmr_random"]), share_of(r, "best")]
            for r in policies[policies["kind"].isin(kinds)].to_dict("records")]


def headline(report: ReportInput) -> Section:
    """Each judge's order-0 pick, majority vote and scorer next to random and the oracle, with a
    paragraph per judge and the gain of every ungated policy as a chart."""
    result = report.result
    policies = result.policies
    prompts = int(policies.loc[policies["kind"] == "random", "n"].iloc[0])
    blocks = [Table(HEADLINE_HEADER, headline_rows(policies),
                    "Headline estimates: each judge's order-0 pick, its majority over orders and each content scorer, "
                    "next to exact random choice and the oracle.")]
    order0 = policies[policies["kind"] == "judge"].set_index("policy")
    for judge in result.judges.to_dict("records"):
        blocks.append(Paragraph(f"{judge['judge']}: " + judge_paragraph(judge, order0.loc[judge["judge"]], prompts)))
    shown = policies[policies["kind"].isin(HEADLINE_KINDS)]
    blocks.append(Figure("headline_gain", figures.policy_forest(shown, report.colours, "gain", "Gain over random",
                                                                "gain over random (alignment)"),
                         "Gain over random of each ungated policy with its 95% interval; 0 is random choice."))
    return Section("headline", "Headline estimates", blocks)


def costs_recorded(policies: pd.DataFrame) -> bool:
    """Whether some judge policy of the cost chart has seconds per prompt (the run recorded them)."""
    return not cost_front(policies, "seconds_per_prompt").empty


def cost_caption(cost: str) -> str:
    """The caption of `figures.cost_gain_chart` for `cost` (calls_per_prompt or seconds_per_prompt)."""
    what = ("judge calls per prompt (1 for one order, K for every order, 1 + (K − 1)·f for prior-corrected)"
            if cost == "calls_per_prompt" else "judge seconds per prompt, as recorded with the calls")
    return (f"Gain over random (95% interval) of each judge's policies against {what}; colour: the judge, marker: "
            "the kind. The dotted staircase joins the policies no cheaper one of the same judge matches; the ringed, "
            "named point is the cheapest with the judge's highest gain.")


def cost_benefit(report: ReportInput) -> Section | None:
    """Each judge's policies' gain against their calls (and, where recorded, seconds) per prompt, with
    the cheapest best policy named per judge."""
    policies = report.result.policies
    points = cost_front(policies)
    if points.empty:
        return None
    best = points[points["best"]]
    blocks = [Figure("cost_gain", figures.cost_gain_chart(policies, report.colours), cost_caption("calls_per_prompt")),
              Table(("judge", "cheapest best policy", "calls per prompt", "gain [95% CI]"),
                    [[str(r["base_judge"]), str(r["policy"]), number(r["cost"]), estimate_of(r, "gain", True)]
                     for r in best.to_dict("records")],
                    "Per judge, the cheapest of its policies that pick on every prompt (its orders, majority, debiased) "
                    "with its highest gain.")]
    if costs_recorded(policies):
        blocks.insert(1, Figure("cost_gain_seconds", figures.cost_gain_chart(policies, report.colours,
                                                                             "seconds_per_prompt"),
                                cost_caption("seconds_per_prompt")))
    return Section("costs", "Gain against cost", blocks)


def position_bias(report: ReportInput) -> Section | None:
    """Slot shares against uniform, the χ² test and the flip rate, per judge."""
    judges = report.result.judges
    if judges.empty:
        return None
    rows = []
    for j in judges.to_dict("records"):
        rows.append([str(j["judge"]), str(int(j["valid"])), share_of(j, "first_slot"), percent(j["first_slot_uniform"]),
                     MISSING if absent(j["chi2"]) else f"{float(j['chi2']):.1f} (df {int(j['chi2_df'])})",
                     p_value(j["chi2_p"]),
                     share_of(j, "flip_rate") if int(j["orders"]) > 1 else "one order", str(int(j["flip_n"]))])
    return Section("position", "Position bias", [
        Table(["judge", "valid calls", "first slot [95% CI]", "first slot if unbiased", "χ²", "p",
               "flip rate [95% CI]", "prompts in every order"], rows,
              "Share of valid calls picking the first slot against the share expected under uniform choice, and the "
              "share of prompts whose returned image changes across orders."),
        Figure("slots", figures.slot_chart(report.result.positions, report.colours),
               "Share of valid calls choosing each slot, per judge; the black dash is the uniform expectation."),
    ])


def gate_rows(gates: pd.DataFrame, policies: pd.DataFrame) -> list[list[str]]:
    """Per gate: coverage, kept and rejected gain and regret, and the paired kept − rejected gain and
    regret with their joint intervals (`gain_vs_rejected`, `regret_vs_rejected`), read in words."""
    by_name = policies.set_index("policy")
    rows = []
    for gate, part in gates.groupby("gate", sort=False):
        kept, rej = (part.set_index("side").loc[side].to_dict() for side in ("kept", "rejected"))
        diff = by_name.loc[gate].to_dict()
        if int(kept["n"]) == 0 or int(rej["n"]) == 0:
            reading = "keeps nothing" if int(kept["n"]) == 0 else "rejects nothing"
        else:
            reading = zero_reading(diff["gain_vs_rejected_lo"], diff["gain_vs_rejected_hi"], "kept above rejected",
                                   "kept below rejected")
        rows.append([str(gate), f"{int(kept['n'])} ({percent(kept['coverage'])})", estimate_of(kept, "gain", True),
                     estimate_of(kept, "regret"),
                     f"{int(rej['n'])} ({percent(rej['coverage'])})", estimate_of(rej, "gain", True), estimate_of(rej, "regret"),
                     estimate_of(diff, "gain_vs_rejected", True), estimate_of(diff, "regret_vs_rejected", True), reading])
    return rows


GATE_HEADER = ("gate", "kept: prompts (coverage)", "kept gain [95% CI]", "kept regret [95% CI]",
               "rejected: prompts (coverage)", "rejected gain [95% CI]", "rejected regret [95% CI]",
               "kept − rejected gain [95% CI]", "kept − rejected regret [95% CI]", "reading")


def gate_sides(report: ReportInput) -> Section | None:
    """Every gate's kept and rejected sides with coverage, and the paired difference between them."""
    result = report.result
    if result.gates.empty:
        return None
    return Section("gates", "Gates: what each keeps and rejects", [
        Paragraph("A gate acts on the prompts it keeps and abstains on the others, where the ungated judge's order-0 "
                  "pick is what users get (the rejected side). The kept − rejected difference resamples all prompts "
                  "jointly; an interval above 0 in gain says the gate keeps the better prompts."),
        Table(GATE_HEADER, gate_rows(result.gates, result.policies)),
        Figure("gates", figures.gate_chart(result.gates),
               "Gain over random on the prompts each gate keeps and rejects (bars, 95% intervals), with the ungated "
               "judge on the same prompts (open diamonds); each gate's coverage is beside its name."),
        Figure("gate_difference", figures.gate_difference_chart(result.policies),
               "Kept minus rejected gain of each gate with its joint 95% interval: green above 0, red below, grey "
               "when the interval includes 0."),
    ])


def every_policy(report: ReportInput) -> Section:
    """Every policy of the naming contract with its coverage and headline measures."""
    policies = report.result.policies
    return Section("policies", "Every policy", [
        Table(HEADLINE_HEADER, headline_rows(policies, tuple(policies["kind"].unique())),
              "Every policy: prompts acted on and coverage, gain, regret, below-mean and best rates (95% intervals). "
              "A rejected side is the ungated judge on the prompts its gate abstains on."),
    ])


def countries(report: ReportInput) -> Section | None:
    """Regret by country per judge with the worst country and the disparity marked."""
    result = report.result
    if result.judges.empty or result.groups.empty:
        return None
    policies = result.policies[result.policies["kind"].isin(("judge", "majority", "debiased", "scorer", *GATED_KINDS))]
    rows = [[str(r["policy"]), percent(r["coverage"]), estimate_of(r, "worst_group_regret"), number(r["disparity"]),
             str(int(r["countries_covered"])) if pd.notna(r["countries_covered"]) else "—"]
            for r in policies.to_dict("records")]
    return Section("countries", "Regret by country", [
        Table(WORST_COUNTRY_HEADER, worst_country_rows(result),
              "Each judge's worst country: the covered country with the highest regret of its order-0 pick."),
        Figure("countries", figures.country_chart(result.groups, result.policies, report.colours),
               "Regret of each judge's order-0 pick per country with within-country 95% intervals; the worst country "
               "of each judge is outlined and named with its disparity (worst − best country) in the legend; the grey "
               "dash is random choice."),
        Table(["policy", "coverage", "worst country's regret [95% CI]", "disparity (worst − best)", "countries covered"],
              rows, "Worst-country regret (stratified bootstrap: the worst country in every resample) and disparity."),
    ])


def cultural(report: ReportInput) -> Section | None:
    """Cultural-error deltas as a chart, and those whose interval excludes 0."""
    result = report.result
    table = result.cultural
    if table.empty or not table["outcome"].isin(ERROR_OUTCOMES).any():
        return None
    errors = table[table["outcome"].isin(ERROR_OUTCOMES)]
    blocks = [Figure("cultural", figures.cultural_chart(errors, result.policies, report.colours, CULTURAL_KINDS),
                     "Error rate of the returned image minus random's on the same prompts, per error type, for each "
                     "judge, majority vote and scorer (95% intervals); negative = fewer errors than random.")]
    rows = cultural_rows(table)
    if rows:
        blocks.append(Table(CULTURAL_HEADER, rows, "Deltas whose interval excludes 0 (Bonferroni over the three error "
                                                   "types where available); sensitive pools: candidates differ in "
                                                   "that error."))
    else:
        blocks.append(Paragraph("No cultural-error delta of a judge, majority vote or scorer has an interval excluding 0."))
    return Section("cultural", "Cultural errors", blocks)


GALLERY_TITLES = {
    "largest_regret_below_mean": "a) Largest-regret below-mean picks",
    "same_slot_every_order": "b) Same slot in every order, a different image each time",
    "unanimity_keeps_below_mean": "c) The unanimity gate keeps a below-mean pick",
    "judge_scorer_disagreement": "d) Judge and content scorer disagree most",
}


def _pool_card(report: ReportInput, rule: str, item: dict, marks: dict[str, str]) -> PoolCard:
    """One chosen pool: every candidate in canonical order with its alignment and generator, framed in
    the colour of whoever the rule is about, best-rated starred."""
    data, r = report.data, int(item["row"])
    h = data.utility[r]
    best = metrics.oracle_value(data.utility[r:r + 1])[0]
    judge, partner = item["judge"], item["partner"]
    names = report.colours
    # (canonical index, colour, mark) of each pick the rule is about
    if rule == "same_slot_every_order":
        who = [(p, names.get(judge, colours.RANDOM), f"{marks[judge]} order {k}") for k, p in enumerate(item["picks"])]
    elif rule == "judge_scorer_disagreement":
        who = [(item["picks"][0], names.get(judge, colours.RANDOM), marks[judge]),
               (item["picks"][1], names.get(partner, colours.RANDOM), str(partner))]
    else:
        who = [(item["picks"][0], names.get(judge, colours.RANDOM),
                marks[judge] + (" unanimous" if rule == "unanimity_keeps_below_mean" else ""))]
    tiles = []
    for c in range(data.mask.shape[1]):
        if not data.mask[r, c]:
            continue
        cid = str(data.candidate_ids[r, c])
        mine = [(colour, mark) for p, colour, mark in who if p == c]
        path = report.image_paths.get(cid)
        tiles.append(Tile(cid, f"alignment {number(h[c])} · {data.source_models[r, c] or 'unknown generator'}",
                          report.image(cid, path), tuple(m[0] for m in mine), tuple(m[1] for m in mine),
                          bool(h[c] >= best - metrics.TOL)))
    key = {"largest_regret_below_mean": f"regret {number(item['key'])}",
           "same_slot_every_order": f"slot {chr(65 + int(item['slot']))} in every order; alignment spread "
                                    f"{number(item['key'])}",
           "unanimity_keeps_below_mean": f"regret {number(item['key'])}",
           "judge_scorer_disagreement": f"vs {partner}: scorer margin {number(item['key'])} of its range"}[rule]
    prompt = data.prompts.iloc[r]
    return PoolCard(f"{judge} · {item['prompt_id']} · {key}", str(prompt["prompt"]), tuple(tiles))


def example_galleries(report: ReportInput) -> Section | None:
    """The four galleries of `audit_core.selection.galleries`, each pool's candidates embedded."""
    data = report.data
    if not data.judges:
        return None
    marks = {name: name for name in (*data.judges, *data.scorers)}
    blocks = [Paragraph(f"Pools chosen by fixed rules (at most {galleries.LIMIT} per judge, or per judge and scorer), "
                        "never by hand. Each candidate shows its mean alignment and generator; a frame in a judge's "
                        "colour marks its pick, ★ the best-rated image.")]
    for rule, chosen in galleries.galleries(data).items():
        cards = tuple(_pool_card(report, rule, item, marks) for item in chosen.to_dict("records"))
        blocks.append(Gallery(GALLERY_TITLES[rule], galleries.RULES[rule], cards))
    return Section("galleries", "Example galleries", blocks)


BUILDERS = (headline, cost_benefit, position_bias, gate_sides, every_policy, countries, cultural, example_galleries)
