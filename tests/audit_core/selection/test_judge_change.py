"""Judge change: paired differences against numpy by hand, verdict rules at their boundaries, the check
grammar, and the JudgeActs 4B → 8B change against the published study.

Tolerances: a paired difference and its interval are compared with numpy's own computation from the
same per-prompt values and the same index draws (`default_rng(seed).integers(0, n, size=(B, n))`,
n ≤ 1000) to 1e-12 (summation order); negating a difference moves a percentile's interpolation
weight by ~1e-16, hence 1e-12 for swapped bounds too. On the JudgeActs main split in the study's
prompt order and seed the intervals rest on exact alignment ratings, so they equal the published
ones to 1e-9.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit_core import store
from audit_core.errors import InputError
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import load_selection_data
from audit_core.selection.judge_change import (
    DISCARDS,
    FILTERS,
    KEEPS_NOTHING,
    NO_EVIDENCE,
    REJECTS_NOTHING,
    VerdictRule,
    compare_judges,
    default_checks,
    gate_verdict,
    pair_judges,
    parse_check,
    parse_pair_gate,
)
from audit_core.stats.resampling import Resampling
from tests.support.judge_change import gate_split, in_file_order, ingest_main_with_8b, main_file_order
from tests.support.paths import JUDGEACTS_MAIN
from tests.support.selection_data import make_data, random_data

TOL = 1e-12
R = Resampling(1_000, 7)


def by_hand(values: np.ndarray, resampling: Resampling) -> tuple[float, float, float]:
    """(mean, lo, hi) of a fixed-n percentile bootstrap of `values`, computed directly with numpy."""
    n = len(values)
    index = np.random.default_rng(resampling.seed).integers(0, n, size=(resampling.resamples, n))
    lo, hi = np.percentile(values[index].mean(axis=1), [2.5, 97.5])
    return float(values.mean()), float(lo), float(hi)


def gains(h: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Per prompt h[pick] − mean h over the pool, NaN where pick < 0 (numpy, independently of metrics)."""
    rows = np.arange(len(h))
    chosen = np.where(pick >= 0, h[rows, np.clip(pick, 0, None)], np.nan)
    return chosen - np.nanmean(h, axis=1)


def row(change, measure: str, policy: str):
    frame = change.compare
    return frame[(frame["measure"] == measure) & (frame["policy"] == policy)].iloc[0]


@pytest.fixture(scope="module")
def random_change():
    data = random_data(n=60, seed=3)
    return data, compare_judges(pair_judges(data, "a", "b"), resampling=R)


def test_paired_gain_of_order0_and_an_order_gate_equals_numpy_by_hand(random_change) -> None:
    data, change = random_change
    h, a, b = data.utility, data.picks["a"], data.picks["b"]

    def two_of_three(p: np.ndarray) -> np.ndarray:
        """The pick at least two of three parsed orders agree on, else −1."""
        agreed = np.where(p[:, 0] == p[:, 1], p[:, 0],
                          np.where(p[:, 2] == p[:, 1], p[:, 1], np.where(p[:, 0] == p[:, 2], p[:, 0], -1)))
        return np.where((p >= 0).all(axis=1), agreed, -1)

    for policy, pa, pb in (("order0", a[:, 0], b[:, 0]), ("orders>=2/3", two_of_three(a), two_of_three(b)),
                           ("orders>=2/3 rejected", np.where(two_of_three(a) < 0, a[:, 0], -1),
                            np.where(two_of_three(b) < 0, b[:, 0], -1))):
        ga, gb = gains(h, pa), gains(h, pb)
        both = ~np.isnan(ga) & ~np.isnan(gb)
        expected = by_hand(gb[both] - ga[both], R)
        got = row(change, "gain", policy)
        assert got["n"] == both.sum()
        assert got["baseline"] == pytest.approx(ga[both].mean(), abs=TOL)
        assert got["candidate"] == pytest.approx(gb[both].mean(), abs=TOL)
        assert (got["difference"], got["difference_lo"], got["difference_hi"]) == pytest.approx(expected, abs=TOL)


def test_flip_rate_and_first_slot_over_all_orders_by_hand(random_change) -> None:
    data, change = random_change
    a, b = data.picks["a"], data.picks["b"]
    flip = {j: np.where((p >= 0).all(axis=1), (p != p[:, :1]).any(axis=1), np.nan) for j, p in (("a", a), ("b", b))}
    both = ~np.isnan(flip["a"]) & ~np.isnan(flip["b"])
    got = row(change, "flip_rate", "all orders")
    assert (got["difference"], got["difference_lo"], got["difference_hi"]) == pytest.approx(
        by_hand(flip["b"][both] - flip["a"][both], R), abs=TOL)
    # first slot: ratio of slot-A calls to valid calls, each judge over prompts where both have one
    first = {j: ((data.slots[j] == 0) & (data.picks[j] >= 0)).sum(axis=1) for j in "ab"}
    valid = {j: (data.picks[j] >= 0).sum(axis=1) for j in "ab"}
    keep = (valid["a"] > 0) & (valid["b"] > 0)
    index = np.random.default_rng(R.seed).integers(0, keep.sum(), size=(R.resamples, keep.sum()))
    share = {j: first[j][keep][index].sum(axis=1) / valid[j][keep][index].sum(axis=1) for j in "ab"}
    got = row(change, "first_slot", "all orders")
    assert got["baseline"] == pytest.approx(first["a"][keep].sum() / valid["a"][keep].sum(), abs=TOL)
    assert (got["difference_lo"], got["difference_hi"]) == pytest.approx(
        tuple(np.percentile(share["b"] - share["a"], [2.5, 97.5])), abs=TOL)


def test_a_paired_difference_is_the_difference_of_the_audit_estimates_on_shared_prompts() -> None:
    h, picks = gate_split(40)
    data = make_data(h, {"small": picks["small"], "large": picks["large"]})
    change = compare_judges(pair_judges(data, "small", "large"), resampling=R)
    audit = audit_selection(data, Resampling(0)).policies.set_index("policy")
    for measure in ("gain", "regret", "bmr", "best"):
        got = row(change, measure, "order0")
        assert got["baseline"] == pytest.approx(audit.loc["small", measure], abs=TOL)
        assert got["candidate"] == pytest.approx(audit.loc["large", measure], abs=TOL)
        assert got["difference"] == pytest.approx(audit.loc["large", measure] - audit.loc["small", measure], abs=TOL)


def test_a_judge_against_itself_differs_by_exactly_zero(random_change) -> None:
    data, _ = random_change
    change = compare_judges(pair_judges(data, "a", "a"), resampling=R)
    frame = change.compare
    assert len(frame) > 30
    defined = frame["n"] > 0
    for column in ("difference", "difference_lo", "difference_hi"):
        assert (frame.loc[defined, column] == 0.0).all(), column
    assert (frame["baseline"].fillna(-9) == frame["candidate"].fillna(-9)).all()
    gates = change.gates
    assert gates[gates["role"] == "baseline"]["verdict"].tolist() == gates[gates["role"] == "candidate"]["verdict"].tolist()
    assert change.disagreement.n == 0


def test_swapping_the_judges_negates_every_difference_and_swaps_its_bounds(random_change) -> None:
    data, forward = random_change
    backward = compare_judges(pair_judges(data, "b", "a"), resampling=R)
    f, b = forward.compare, backward.compare
    assert f[["measure", "policy", "n"]].equals(b[["measure", "policy", "n"]])
    np.testing.assert_allclose(f["baseline"], b["candidate"], atol=TOL)
    np.testing.assert_allclose(f["difference"], -b["difference"], atol=TOL)
    np.testing.assert_allclose(f["difference_lo"], -b["difference_hi"], atol=TOL)
    np.testing.assert_allclose(f["difference_hi"], -b["difference_lo"], atol=TOL)


def test_a_copy_of_the_baseline_gets_the_same_verdicts() -> None:
    h, picks = gate_split(40)
    data = make_data(h, picks)
    change = compare_judges(pair_judges(data, "small", "small_copy"), resampling=R)
    assert (change.compare.loc[change.compare["n"] > 0, ["difference", "difference_lo", "difference_hi"]] == 0).all().all()
    verdicts = change.gates.set_index(["gate", "role"])["verdict"]
    for gate in change.gate_labels:
        assert verdicts[(gate, "baseline")] == verdicts[(gate, "candidate")]


def test_the_unanimity_gate_filters_one_judges_failures_and_discards_the_others_good_decisions() -> None:
    h, picks = gate_split(40)
    data = make_data(h, picks)
    change = compare_judges(pair_judges(data, "small", "large"), resampling=R)
    gates = change.gates.set_index(["gate", "judge"])
    assert gates.loc[("orders>=3/3", "small"), "verdict"] == FILTERS
    assert gates.loc[("orders>=3/3", "large"), "verdict"] == DISCARDS
    assert gates.loc[("orders>=3/3", "small"), "coverage"] == 0.5
    failing = [t for t in default_checks(change.gate_labels) if not change.check(parse_check(t)).holds]
    assert failing == [t for t in default_checks(change.gate_labels) if "orders>=" in t]
    # a gate that keeps nothing: the two judges never agree on the second half, and both pick the best on the first
    pair = pair_judges(data, "small", "large")
    never = parse_pair_gate(pair, "small: entropy<=-1", ["small", "large"])
    kept_nothing = compare_judges(pair, [never], R, standard=False)
    assert kept_nothing.gates["verdict"].tolist() == [KEEPS_NOTHING, KEEPS_NOTHING]


@pytest.mark.parametrize(("kept_n", "rejected_n", "rejected_lo", "kmr_lo", "expected"), [
    (10, 10, 0.0, 0.01, FILTERS),  # the rejected interval reaches random: at the boundary
    (10, 10, -0.2, 1e-9, FILTERS),
    (10, 10, 0.0, 0.0, NO_EVIDENCE),  # kept − rejected not above 0, rejected not above random
    (10, 10, -0.2, -0.1, NO_EVIDENCE),
    (10, 10, 1e-9, 0.5, DISCARDS),  # just above random
    (10, 10, 0.05, -0.3, DISCARDS),
    (10, 10, math.nan, math.nan, NO_EVIDENCE),  # no interval (0 resamples)
    (0, 20, -0.5, math.nan, KEEPS_NOTHING),
    (20, 0, math.nan, math.nan, REJECTS_NOTHING),
])
def test_verdict_rules_at_each_boundary(kept_n, rejected_n, rejected_lo, kmr_lo, expected) -> None:
    assert gate_verdict(kept_n, rejected_n, rejected_lo, kmr_lo) == expected


def test_rules_changed_by_the_user_change_the_verdict() -> None:
    stricter = VerdictRule().replaced(["discards_rejected_lo_above=0.05", "filters_rejected_lo_at_most = -0.01"])
    assert stricter == VerdictRule(-0.01, 0.0, 0.05)
    assert gate_verdict(10, 10, 0.03, 0.2) == DISCARDS
    assert gate_verdict(10, 10, 0.03, 0.2, stricter) == NO_EVIDENCE
    assert gate_verdict(10, 10, -0.005, 0.2, stricter) == NO_EVIDENCE
    looser = VerdictRule().replaced(["filters_rejected_lo_at_most=0.05"])
    assert gate_verdict(10, 10, 0.03, 0.2, looser) == FILTERS  # the first rule that applies
    assert "rejected_gain_lo > 0.05" in "\n".join(stricter.describe())
    for bad in ("discards=0.1", "discards_rejected_lo_above", "discards_rejected_lo_above=high",
                "discards_rejected_lo_above=nan"):
        with pytest.raises(InputError, match="rule"):
            VerdictRule().replaced([bad])


@pytest.mark.parametrize(("text", "where"), [
    ("", "character 1: empty"),
    ("difference_lo(gain, order0) >", "character 30: expected a number"),
    ("difference_lo(gain order0) > 0", "character 20: expected ','"),
    ("gain(order0) > 0", "unknown function 'gain'"),
    ('verdict(candidate, "orders>=3/3") == "filters"', "is not a verdict"),
    ('verdict(candidate, "orders>=3/3") > "filters failures"', "texts are compared with == or !="),
    ('verdict(candidate, "orders>=3/3") == 1', "compares a text with a number"),
    ("1 < 2", "compares two constants"),
    ("n(gain, order0) > 0 and", "expected a number"),
    ("n(gain, order0) > 0 n(gain, order0) < 9", "expected 'and' or 'or'"),
    ("n(gain, order0) ≥ 0", "unexpected '≥'"),
])
def test_malformed_checks_are_refused_naming_the_check_and_the_character(text, where) -> None:
    with pytest.raises(InputError) as err:
        parse_check(text)
    assert where in str(err.value)
    assert repr(text)[:20] in str(err.value)


def test_checks_read_the_tables_with_and_binding_tighter_than_or() -> None:
    h, picks = gate_split(40)
    data = make_data(h, picks)
    change = compare_judges(pair_judges(data, "small", "large"), resampling=R)

    def holds(text: str) -> bool:
        return change.check(parse_check(text)).holds

    assert holds('verdict(small, "orders>=3/3") == "filters failures"')
    assert holds('VERDICT(candidate, "large agree>=3/3") == "discards good decisions"')  # a policy name of either judge
    assert holds('verdict(baseline, "small: orders>=3/3") == "filters failures"')  # gate_compose's syntax
    assert holds('rejected_gain_hi(large, "orders>=3/3") > 0 and coverage(large, "orders>=3/3") == 0.5')
    assert holds("n(gain, order0) == 40 or n(gain, order0) == 1 and n(gain, order0) == 2")
    assert not holds("n(gain, order0) == 1 and n(gain, order0) == 40 or n(gain, order0) == 2")
    assert holds('difference(gain, "small agree>=3/3 rejected") > 0.3')
    assert holds("difference_lo(gain, order0) >= -1e-1")
    none_kept = compare_judges(pair_judges(data, "small", "small"), resampling=Resampling(0, 0))
    outcome = none_kept.check(parse_check("difference_lo(gain, order0) > -1"))
    assert not outcome.holds and math.isnan(outcome.values["difference_lo(gain, order0)"])  # undefined never holds
    for text, message in (("n(gain, order9) > 0", "no policy 'order9'"), ("n(speed, order0) > 0", "no measure 'speed'"),
                          ('coverage(other, "orders>=3/3") > 0', "no judge 'other'"),
                          ('coverage(baseline, "orders>=4/4") > 0', "no gate 'orders>=4/4'"),
                          ("n(first_slot, majority) > 0", "policy 'majority' has no measure 'first_slot'")):
        with pytest.raises(InputError, match=message) as err:
            change.check(parse_check(text))
        assert text[:12] in str(err.value)


def test_pairs_from_two_datasets_need_the_same_pools() -> None:
    h, picks = gate_split(20)
    base = make_data(h, {"small": picks["small"]})
    other = make_data(h, {"small": picks["large"]})
    pair = pair_judges(base, "small", "small", other)
    assert (pair.baseline, pair.candidate) == ("small", "small@candidate")
    same = compare_judges(pair_judges(make_data(h, {"small": picks["small"], "large": picks["large"]}), "small", "large"),
                          resampling=R)
    assert compare_judges(pair, resampling=R).compare.equals(same.compare)
    shifted = h.copy()
    shifted[3, 0] += 1 / 24
    with pytest.raises(InputError, match="do not hold the same pools: candidate 'p003_SD35' has alignment rating"):
        pair_judges(base, "small", "small", make_data(shifted, {"small": picks["large"]}))
    with pytest.raises(InputError, match="prompt 'p019' is only in"):
        pair_judges(base, "small", "small", make_data(h[:19], {"small": picks["large"][:19]}))
    with pytest.raises(InputError, match=r"judge 'nobody' is not a selector judge of dataset 'test' \(judges: small\)"):
        pair_judges(base, "small", "nobody")


def test_a_gate_must_name_one_of_the_two_judges_and_apply_to_both() -> None:
    h, picks = gate_split(20)
    pair = pair_judges(make_data(h, picks), "small", "large")
    gate = parse_pair_gate(pair, "large: orders>=2/3 and judge(small_copy)", ["small", "large"])
    assert gate.judge == "small"
    with pytest.raises(InputError, match="base judge must be the baseline or the candidate"):
        parse_pair_gate(pair, "small_copy: orders>=2/3", ["small", "large"])
    with pytest.raises(InputError, match="cannot apply to 'large'.*compares the base judge with itself"):
        parse_pair_gate(pair, "small: judge(large)", ["small", "large"])
    with pytest.raises(InputError, match="character"):
        parse_pair_gate(pair, "small: orders>=", ["small", "large"])


# ------------------------------------------------------------ the published 4B → 8B change

# results/main/extension.json of the study: judges.{bf16_4b,mlx_8b}.rejected_by_unanimity and
# cross_model_gate_mlx8b_bf16_4b (rejected_4b_choice, rejected_8b_choice: the prompts where the picks differ)
PUBLISHED_REJECTED = {"qwen": (-0.029671011793916825, -0.056932805710738665, -0.002389238050900072),
                      "qwen8b": (0.068260120585702, 0.035931443798449605, 0.09943071705426355)}
PUBLISHED_DIFFER = {"n": 126, "qwen": (-0.038569223985890654, -0.07059096671075837, -0.007131696428571435),
                    "qwen8b": (0.09846781305114638, 0.06972539131393296, 0.12681947200176363)}
STUDY = Resampling(10_000, 20261002)


@pytest.fixture(scope="module")
def published_order(tmp_path_factory):
    """The main split with the 8B run, prompts in the study's order: its draws are the study's."""
    if not JUDGEACTS_MAIN.is_dir():
        pytest.skip(f"{JUDGEACTS_MAIN} is not available")
    db = ingest_main_with_8b(tmp_path_factory.mktemp("ja8b") / "ja.duckdb")
    con = store.connect(db, read_only=True)
    try:
        data = load_selection_data(con, "main")
    finally:
        con.close()
    return in_file_order(data, main_file_order())


def test_the_unanimity_gate_and_the_disagreement_match_the_published_study(published_order) -> None:
    pair = pair_judges(published_order, "qwen", "qwen8b")
    unanimity = parse_pair_gate(pair, "qwen: orders>=3/3", ["qwen", "qwen8b"])
    change = compare_judges(pair, [unanimity], STUDY, standard=False)
    gates = change.gates.set_index("judge")
    for judge, expected in PUBLISHED_REJECTED.items():
        got = gates.loc[judge, ["rejected_gain", "rejected_gain_lo", "rejected_gain_hi"]].to_numpy(float)
        np.testing.assert_allclose(got, expected, atol=1e-9)
    assert gates.loc["qwen", "verdict"] == FILTERS
    assert gates.loc["qwen8b", "verdict"] == DISCARDS
    split = change.disagreement
    assert split.n == PUBLISHED_DIFFER["n"] and split.both == 300
    np.testing.assert_allclose(split.baseline_gain, PUBLISHED_DIFFER["qwen"], atol=1e-9)
    np.testing.assert_allclose(split.candidate_gain, PUBLISHED_DIFFER["qwen8b"], atol=1e-9)
    differ = row(change, "gain", "order0 where picks differ")
    assert differ["difference"] == pytest.approx(PUBLISHED_DIFFER["qwen8b"][0] - PUBLISHED_DIFFER["qwen"][0], abs=1e-12)
