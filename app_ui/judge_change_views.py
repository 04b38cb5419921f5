"""The Judge comparison page's judge change: a baseline and a candidate judge picked in the URL,
their `JudgeChange` (`audit_core.selection.judge_change`) computed once per dataset content, pool,
judge pair and resample count (seed 0, as every page) and kept beside the database
(`audit_core.store.audit_cache`, where `runners.analyze --cache-only` keeps the pair the page opens
with), then in memory per database file and stamp, and drawn: the paired
differences as a forest chart with the measures and policies it shows in the URL, the prompts
where the order-0 picks differ, and the gate verdicts with their rule in words
(`findings.judge_change` formats all of it, for the report too).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import streamlit as st

from app_ui import context, draw, glance
from app_ui.context import Selection
from audit_core import SelectionData
from audit_core.selection.judge_change import JudgeChange, compare_judges, default_pair, pair_judges
from audit_core.store import audit_cache
from findings import colours
from findings import judge_change as jc

# URL parameters
BASELINE = "baseline"
CANDIDATE = "candidate"
MEASURE = "measure"  # repeatable
POLICY = "policy"  # repeatable


def pick_judges(sel: Selection) -> tuple[str, str]:
    """Draw the baseline and candidate pickers, bound to the URL (defaults: the first judge, then
    the first other one); the candidate is never the baseline. A judge chosen as baseline while it
    was the candidate hands the candidate back to its default, so the pair stays two judges."""
    judges = list(sel.judges)
    left, right = st.columns(2)
    baseline = context.bound(left.selectbox, "Baseline judge", BASELINE, default_pair(judges)[0], judges,
                             help="The judge the gates were validated for.")
    others = [j for j in judges if j != baseline]
    if st.session_state.get(CANDIDATE) == baseline:
        st.session_state[CANDIDATE] = others[0]
    return baseline, context.bound(right.selectbox, "Candidate judge", CANDIDATE, others[0], others,
                                   help="The judge that would replace the baseline.")


@st.cache_data(max_entries=8, show_spinner="Comparing the two judges (joint prompt-level bootstrap)…")
def _judge_change(db_path: str, stamp: float, dataset_id: str, pool: str, baseline: str, candidate: str,
                  resamples: int, content: str, _data: SelectionData) -> JudgeChange:
    # kept beside the database once per dataset content, as the audit is (`runners.analyze --cache-only` keeps
    # the pair the page opens with), then in memory
    settings = context.resampling(resamples)
    key = audit_cache.judge_change_key(content, dataset_id, settings, pool, baseline, candidate)
    if (kept := audit_cache.load(db_path, key, JudgeChange)) is not None:
        return kept
    result = compare_judges(pair_judges(_data, baseline, candidate), resampling=settings)
    audit_cache.store(db_path, key, result)
    return result


def judge_change(sel: Selection, baseline: str, candidate: str) -> JudgeChange:
    """The two judges compared with the standard gates, the sidebar's resamples and seed 0 (cached)."""
    return _judge_change(sel.db_path, sel.stamp, sel.dataset_id, sel.pool, baseline, candidate, sel.resamples,
                         sel.content(), sel.data())


def differences(change: JudgeChange, names: Mapping[str, str]) -> None:
    """The measure and policy pickers (in the URL) and the paired-difference chart they choose."""
    measures = list(dict.fromkeys(change.compare["measure"]))
    policies = list(dict.fromkeys(change.compare["policy"]))
    left, right = st.columns(2)
    chosen = context.bound(left.multiselect, "Measures", MEASURE, jc.DEFAULT_MEASURES, measures,
                           format_func=jc.measure_name)
    shown = context.bound(right.multiselect, "Policies", POLICY, tuple(jc.default_policies(change)), policies,
                          help="Each order's pick, majority, each gate's kept side (and `<gate> rejected`: the "
                          "judge's order-0 pick where the gate abstains), `all orders` (first-slot share and flip "
                          "rate) and the prompts where the order-0 picks differ.")
    if jc.chart_rows(change.compare, chosen, shown).empty:
        st.info("No paired difference among the chosen measures and policies: pick others.")
        return
    draw.chart(jc.difference_chart(change, chosen, shown, names.get(change.candidate, colours.RANDOM)),
               jc.CHART_CAPTION + " Hover for each judge's mean and the number of prompts.")


def verdicts(change: JudgeChange) -> None:
    """The prompts where the picks differ, the verdict rule in words, and the verdict table."""
    st.markdown(draw.esc(jc.picks_differ(change)))
    st.markdown(draw.esc(jc.rule_in_words(change.rule)))
    glance.frame(pd.DataFrame(jc.verdict_rows(change), columns=list(jc.VERDICT_HEADER)))
    st.caption(jc.VERDICT_CAPTION)
