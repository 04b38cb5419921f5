"""Composed gates: the text form, what a gate keeps, and its audit against the standard gates'."""

from __future__ import annotations

import math
from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit_core import Resampling
from audit_core.errors import InputError
from audit_core.selection import gate_compose as gc
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import SelectionData, load_selection_data
from audit_core.selection.gates import GATE_COLUMNS
from runners.demo import build_demo
from tests.support.selection_data import random_data

RESAMPLES, SEED = 400, 5
META = ["policy", "gate", "kind", "threshold", "orders", "partner"]  # what names a gate, not what it measures


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> SelectionData:
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo(db, n_prompts=100, progress=False)  # the demo's generator, judges and scorer, fewer prompts
    con = duckdb.connect(str(db), read_only=True)
    try:
        return load_selection_data(con, "demo")
    finally:
        con.close()


@pytest.fixture(scope="module")
def built() -> SelectionData:
    return random_data(n=60, seed=4)  # judges a and b (3 orders, some parse failures), scorer clip


@pytest.fixture(scope="module")
def audits(demo, built) -> dict[str, tuple[SelectionData, object]]:
    return {name: (data, audit_selection(data, Resampling(RESAMPLES, SEED))) for name, data in (("demo", demo), ("built", built))}


def _same(standard: pd.DataFrame, composed: pd.DataFrame) -> None:
    """Every measure of `composed` equals `standard`'s, row for row; a measure only the standard
    table has (another policy's) is undefined in its rows."""
    standard, composed = standard.reset_index(drop=True), composed.reset_index(drop=True)
    assert len(standard) == len(composed) > 0
    for column in standard.columns.difference(META):
        if column not in composed:
            assert standard[column].isna().all(), column
            continue
        left, right = standard[column], composed[column]
        if pd.api.types.is_numeric_dtype(left) and pd.api.types.is_numeric_dtype(right):
            # same draws, same formula; BLAS may sum a product of another shape in another order
            np.testing.assert_allclose(right.to_numpy(float), left.to_numpy(float), rtol=0, atol=1e-12,
                                       equal_nan=True, err_msg=column)
        else:
            assert left.tolist() == right.tolist(), column


STANDARD = {
    "demo": [("strong-judge: orders>=2/3", "strong-judge agree>=2/3"),
             ("slot-a-judge: orders>=3/3", "slot-a-judge agree>=3/3"),
             ("weak-judge: judge(strong-judge)", "weak-judge+strong-judge agree"),
             ("slot-a-judge: scorer(content-scorer)", "slot-a-judge+content-scorer agree")],
    "built": [("a: orders>=2/3", "a agree>=2/3"), ("b: orders(b)>=3/3", "b agree>=3/3"),
              ("a: judge(b)", "a+b agree"), ("b: scorer(clip)", "b+clip agree")],
}


@pytest.mark.parametrize(("dataset", "text", "standard"),
                         [(d, t, s) for d, pairs in STANDARD.items() for t, s in pairs])
def test_a_composed_gate_equal_to_a_standard_gate_gives_its_numbers(audits, dataset, text, standard):
    data, result = audits[dataset]
    composed = gc.evaluate(gc.parse_gate(text), data, Resampling(RESAMPLES, SEED))
    sides = [composed.name, f"{composed.name} rejected"]
    assert composed.policies.set_index("policy").loc[composed.name, "kind"] == "composed_gate"
    _same(result.policies.set_index("policy").loc[[standard, f"{standard} rejected"]].reset_index(),
          composed.policies.set_index("policy").loc[sides].reset_index())
    _same(result.gates[result.gates["gate"] == standard], composed.gates)
    _same(result.groups[result.groups["policy"] == standard], composed.countries)
    _same(result.risk_coverage[result.risk_coverage["policy"] == standard].drop(columns=["threshold", "tau"]),
          composed.point)
    base = data.picks[text.split(":")[0]][:, 0]
    assert composed.gates["coverage"].sum() == pytest.approx((base >= 0).mean())  # the two sides split its prompts


def _entropy(votes: list[int], m: int) -> float:
    shares = [c / len(votes) for c in Counter(votes).values()]
    return -sum(p * math.log(p) for p in shares) / math.log(m)


def test_conditions_and_precedence_follow_a_per_prompt_reference(built):
    text = "a: orders>=2/3 and margin(clip)>=0.2 or judge(b) and entropy(b)<=0.6 or scorer(clip)"
    kept, rejected = gc.gate_picks(gc.parse_gate(text), built)
    for p in range(built.n_prompts):
        a, b = list(built.picks["a"][p]), list(built.picks["b"][p])
        m = int(built.mask[p].sum())
        scores = sorted((s for s in built.scores["clip"][p] if not math.isnan(s)), reverse=True)
        argmax = int(np.nanargmax(built.scores["clip"][p]))
        parsed_a, parsed_b = min(a) >= 0, min(b) >= 0
        top = Counter(a).most_common(1)[0][1] if parsed_a else 0
        first = (parsed_a and top >= 2) and scores[0] - scores[1] >= 0.2
        second = (a[0] >= 0 and a[0] == b[0]) and (parsed_b and _entropy(b, m) <= 0.6)
        third = a[0] >= 0 and a[0] == argmax
        # an order condition on the base judge: the gate returns a's majority (ties: lowest index)
        majority = min(c for c, n in Counter(a).items() if n == top) if parsed_a else -1
        expected = majority if (first or second or third) and majority >= 0 else -1
        assert kept[p] == expected, p
        assert rejected[p] == (a[0] if expected < 0 and a[0] >= 0 else -1), p
    assert 0 < (kept >= 0).sum() < built.n_prompts


def test_without_an_order_condition_on_the_base_judge_the_gate_returns_its_order_0_pick(built):
    gate = gc.parse_gate("a: orders(b)>=3/3 or margin(clip)>=0.5")
    assert not gate.returns_majority
    kept, _ = gc.gate_picks(gate, built)
    acts = kept >= 0
    assert acts.any() and (kept[acts] == built.picks["a"][acts, 0]).all()


def test_the_kept_minus_rejected_interval_is_a_joint_bootstrap_with_the_same_draws(built):
    gate = gc.parse_gate("a: orders>=2/3 and margin(clip)>=0.1 or judge(b)")
    composed = gc.evaluate(gate, built, Resampling(RESAMPLES, SEED))
    kept, rejected = gc.gate_picks(gate, built)
    h = built.utility
    mean, best = np.nanmean(h, axis=1), np.nanmax(h, axis=1)
    index = np.random.default_rng(SEED).integers(0, built.n_prompts, size=(RESAMPLES, built.n_prompts))

    def side(pick: np.ndarray, stat: str) -> tuple[float, np.ndarray]:
        chosen = np.where(pick >= 0, h[np.arange(len(pick)), np.clip(pick, 0, None)], np.nan)
        values = chosen - mean if stat == "gain" else best - chosen
        drawn = values[index]
        with np.errstate(invalid="ignore"):
            return np.nanmean(values), np.nansum(drawn, axis=1) / (~np.isnan(drawn)).sum(axis=1)

    row = composed.gates.set_index("side").loc["kept"]
    for stat in ("gain", "regret"):
        (k, k_draws), (r, r_draws) = side(kept, stat), side(rejected, stat)
        expected = np.nanquantile(k_draws - r_draws, [0.025, 0.975])
        assert row[f"{stat}_vs_rejected"] == pytest.approx(k - r, abs=1e-12)
        assert (row[f"{stat}_vs_rejected_lo"], row[f"{stat}_vs_rejected_hi"]) == pytest.approx(tuple(expected), abs=1e-12)
    assert composed.gates.set_index("side").loc["rejected", ["gain_vs_rejected", "regret_vs_rejected_lo"]].isna().all()


def test_every_standard_gate_carries_its_kept_minus_rejected_difference(audits):
    _, result = audits["built"]
    assert GATE_COLUMNS[-6:] == ["gain_vs_rejected", "gain_vs_rejected_lo", "gain_vs_rejected_hi",
                                 "regret_vs_rejected", "regret_vs_rejected_lo", "regret_vs_rejected_hi"]
    policies = result.policies.set_index("policy")
    kept = result.gates[result.gates["side"] == "kept"].set_index("gate")
    columns = GATE_COLUMNS[-6:]
    pd.testing.assert_frame_equal(kept[columns], policies.loc[kept.index, columns], check_names=False)
    assert kept["gain_vs_rejected"].notna().all()
    assert result.gates.loc[result.gates["side"] == "rejected", columns].isna().all().all()


# ------------------------------------------------------------ the text form

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12) | st.sampled_from(
    ["qwen", "and", "OR", 'a "quoted" name', "back\\slash", "x:y", "a/b", "orders", "(paren)", " "])
bounds = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def gates(draw) -> gc.ComposedGate:
    judge = draw(names)

    def condition() -> gc.Condition:
        kind = draw(st.sampled_from(gc.KINDS))
        name = draw(st.one_of(st.just(judge), names)) if kind in gc.ORDER_KINDS else draw(names)
        if kind == "orders":
            of = draw(st.integers(1, 12))
            return gc.Condition(kind, name, k=draw(st.integers(1, of)), of=of)
        if kind in ("entropy", "margin"):
            return gc.Condition(kind, name, x=draw(bounds) + 0.0)
        return gc.Condition(kind, name)

    clauses = tuple(tuple(condition() for _ in range(draw(st.integers(1, 3)))) for _ in range(draw(st.integers(1, 3))))
    return gc.ComposedGate(judge, clauses)


@settings(max_examples=300, deadline=None)
@given(gates())
def test_a_gate_survives_its_text_form(gate):
    text = gc.format_gate(gate)
    assert gc.parse_gate(text) == gate
    assert gc.format_gate(gc.parse_gate(text)) == text


def test_the_text_form_reads_as_written():
    gate = gc.parse_gate('  strong-judge :ORDERS>=2/3 AND Scorer( clip ) or judge("weak judge")  ')
    assert gate == gc.ComposedGate("strong-judge", (
        (gc.Condition("orders", "strong-judge", k=2, of=3), gc.Condition("scorer", "clip")),
        (gc.Condition("judge", "weak judge"),)))
    assert gc.format_gate(gate) == 'strong-judge: orders>=2/3 and scorer(clip) or judge("weak judge")'
    assert gc.format_gate(gc.parse_gate("j: entropy(j)<=-0.0")) == "j: entropy<=0.0"


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"),
    ("qwen", "character 5: expected ':', found the end"),
    ("qwen: ", "expected a condition (orders, judge, scorer, entropy, margin), found the end"),
    ("qwen: orders>=4/3", "between 1 and K"),
    ("qwen: orders>=two/3", "expected a whole number, found 'two'"),
    ("qwen: bogus(x)", "unknown condition 'bogus'"),
    ("qwen: judge(b) xor scorer(c)", "character 16: expected 'and' or 'or', found 'xor'"),
    ("qwen: entropy<=nan", "expected a finite number"),
    ('qwen: judge("open', "unexpected '\"'"),
    ("qwen: judge(b) and", "found the end"),
    ("qwen: margin(c)>0.1", "unexpected '>'"),
])
def test_a_text_that_does_not_parse_says_where_and_why(text, says):
    with pytest.raises(InputError) as err:
        gc.parse_gate(text)
    assert says in str(err.value) and err.value.field == "compose"


@pytest.mark.parametrize(("text", "says"), [
    ("nobody: judge(b)", "no judge 'nobody'"),
    ("a: scorer(b)", "no scorer 'b'"),
    ("a: margin(nope)>=0.1", "no scorer 'nope'"),
    ("a: orders>=2/4", "'a' has 3 orders"),
    ("a: judge(a)", "with itself"),
])
def test_a_gate_naming_what_the_dataset_lacks_is_refused(built, text, says):
    with pytest.raises(InputError, match=says.replace("(", r"\(")):
        gc.gate_picks(gc.parse_gate(text), built)
