"""Point estimates on the JudgeActs main split against the published study.

Published values come from "When the Judge Acts" (GitHub seochan99/JudgeActs):
- results/main/summary.json (policies "Random", "Oracle", "Qwen", "Qwen majority",
  "Qwen agree 2/3", "Qwen unanimous", "Qwen, not unanimous", "Smol", "Smol majority",
  "Smol agree 2/3", "Smol unanimous", "Cross-model", "Qwen, judges disagree");
  there "hsr" is the below-mean rate, "hsr05" its 0.05-margin variant, "human_best"
  the best rate;
- results/main/position.json (slot counts, shares, χ², generator shares);
- results/main/robustness.json, slot_by_category.qwen.all (flip rate);
- results/main/extension.json, judges.mlx_8b (Qwen3-VL-8B: slots, χ², flips, unanimity, order 0);
- README.md (CLIP gain 0.069, first slot 48.8% vs 27.8%, flips 59.7%, 40.3% kept);
- intervals: summary.json (`*_ci`), country.json, decomposition.json (the error-sensitive
  subsets) and robustness.json (consensus split, unique best).
Their names map to ours: "Qwen agree 2/3" = `qwen agree>=2/3`, "Qwen unanimous" =
`qwen agree>=3/3`, "Qwen, not unanimous" = `qwen agree>=3/3 rejected`,
"Cross-model" = `qwen+smol agree`, "Qwen, judges disagree" = `qwen+smol agree rejected`.
The re-typed main split rounds rating fractions to 4 decimals, so values are compared
to 4 decimals (the study prints 3).

Intervals: the study bootstraps each statistic over its n prompts with a fresh
`numpy.random.default_rng(20261002)` drawing `integers(n, size=(B, n))` (B = 10,000), the
prompts in the order of data/derived/main.jsonl; the worst group draws the represented
countries in turn (sorted) from one such generator. The store keeps prompts sorted by id,
so the audit here runs on the same arrays reordered to the file's order with the study's
seed: its intervals then equal the published ones digit for digit where they rest on
alignment ratings (exact in the re-typed split) and to 5e-5 where they rest on the rounded
cultural-error fractions.
"""

from __future__ import annotations

import json

import pytest

from audit_core import Resampling, store
from audit_core.selection.audit import audit_selection
from audit_core.selection.data import load_selection_data
from runners import ingest
from tests.support.judge_change import in_file_order
from tests.support.paths import JUDGEACTS_MAIN as JUDGEACTS

TOL = 5e-4
STUDY_SEED = 20261002
ALIGNMENT_TOL = 1e-9  # intervals of alignment measures: the same draws, the same ratings
ERROR_TOL = 5e-5  # intervals of cultural-error deltas: those ratings are rounded to 4 decimals

# policy -> {column: published value}
PUBLISHED_POLICIES = {
    "random": {"n": 300, "utility": 0.730213, "regret": 0.199093, "bmr": 0.430833, "best": 0.418889,
               "bmr05": 0.369722, "near_best": 0.425556, "worst_group_regret": 0.265856, "disparity": 0.107523,
               "stereotype_chosen": 0.124519, "missing_explicit_chosen": 0.316907, "overall_regret": 0.200571},
    "oracle": {"utility": 0.929306, "gain": 0.199093, "stereotype_chosen": 0.104259, "missing_explicit_chosen": 0.078611,
               "image_quality_chosen": 0.824931, "overall_chosen": 0.779850, "stereotype_delta": -0.020259},
    "qwen": {"n": 300, "utility": 0.769528, "regret": 0.159778, "gain": 0.039315, "best": 0.51, "near_best": 0.516667,
             "bmr": 0.363333, "bmr_lo": 0.310954, "bmr_hi": 0.419168, "bmr05": 0.306667, "bmr_delta": -0.0675,
             "stereotype_delta": 0.023259, "missing_explicit_delta": -0.055519, "missing_implicit_delta": -0.033597,
             "image_quality_delta": -0.030532, "overall_delta": 0.022987, "overall_regret": 0.177583,
             "regret_median": 0.0, "worst_group_regret": 0.275, "disparity": 0.175},
    "qwen majority": {"n": 300, "regret": 0.1345, "gain": 0.064593, "best": 0.543333, "bmr": 0.316667,
                      "missing_explicit_delta": -0.091907, "worst_group_regret": 0.186111, "disparity": 0.088333},
    "qwen agree>=2/3": {"n": 242, "coverage": 0.806667, "regret": 0.111123, "gain": 0.094479, "bmr": 0.247934,
                        "stereotype_delta": 0.001228, "missing_explicit_delta": -0.134567,
                        "worst_group_regret": 0.153509, "disparity": 0.066842},
    "qwen agree>=3/3": {"n": 121, "coverage": 0.403333, "regret": 0.073691, "gain": 0.141368, "bmr": 0.165289,
                        "best": 0.710744, "worst_group_regret": 0.114583, "disparity": 0.104779},
    "qwen agree>=3/3 rejected": {"n": 179, "regret": 0.217970, "gain": -0.029671, "bmr": 0.497207,
                                 "worst_group_regret": 0.369048, "disparity": 0.238095},
    "smol": {"n": 297, "coverage": 0.99, "regret": 0.270174, "gain": -0.072624, "best": 0.289562, "bmr": 0.602694,
             "bmr05": 0.525253, "missing_explicit_delta": 0.110251, "regret_median": 0.25,
             "worst_group_regret": 0.4, "disparity": 0.216379},
    "smol majority": {"n": 289, "regret": 0.254729, "gain": -0.056264, "bmr": 0.574394, "worst_group_regret": 0.377778},
    "smol agree>=2/3": {"n": 131, "regret": 0.215967, "gain": -0.021973, "bmr": 0.496183, "worst_group_regret": 0.430556},
    "smol agree>=3/3": {"n": 7, "regret": 0.208333, "gain": 0.042659, "countries_covered": 4, "worst_group_regret": 0.5},
    "qwen+smol agree": {"n": 59, "regret": 0.249294, "gain": -0.060323, "bmr": 0.542373, "image_quality_delta": -0.154190,
                        "worst_group_regret": 0.489583, "disparity": 0.422917},
    "qwen+smol agree rejected": {"n": 241, "regret": 0.137863, "gain": 0.063707, "bmr": 0.319502,
                                 "worst_group_regret": 0.224638, "disparity": 0.134894},
    "clip": {"gain": 0.069},  # README, printed to 3 decimals
    "qwen8b": {"n": 300, "utility": 0.827083, "regret": 0.102222, "gain": 0.096870, "bmr": 0.24,
               "bmr_lo": 0.195153, "bmr_hi": 0.291421, "bmr_delta": -0.190833},  # extension.json
    "qwen8b agree>=3/3": {"n": 171, "coverage": 0.57},
}

PUBLISHED_JUDGES = {  # position.json; flip rate from robustness.json
    "qwen": {"valid": 900, "first_slot": 0.487778, "first_slot_uniform": 0.277778, "chi2": 219.152, "chi2_df": 3,
             "flip_rate": 0.596667},
    "smol": {"valid": 886, "first_slot": 0.430023, "first_slot_uniform": 0.277652, "chi2": 521.522303, "chi2_df": 3},
    "qwen8b": {"valid": 900, "first_slot": 0.273333, "chi2": 7.298667, "chi2_p": 0.062964, "flip_rate": 0.43},
}
PUBLISHED_SLOTS = {"qwen": {"A": 0.487778, "B": 0.248889, "C": 0.193333, "D": 0.07},
                   "smol": {"A": 0.430023, "B": 0.503386, "C": 0.041761, "D": 0.024831}}
PUBLISHED_GENERATORS = {  # position.json, generator names as in our store
    ("qwen", "GPT-Image"): 0.578889, ("qwen", "Flux.1-Dev"): 0.084444, ("qwen", "SD-3.5-Large"): 0.175556,
    ("qwen", "Imagen3"): 0.161111, ("smol", "Flux.1-Dev"): 0.352144, ("smol", "Imagen3"): 0.092551,
}
PUBLISHED_UNIFORM = {"SD-3.5-Large": 0.275556, "Flux.1-Dev": 0.273333, "GPT-Image": 0.272222, "Imagen3": 0.178889}


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    if not JUDGEACTS.is_dir():
        pytest.skip(f"{JUDGEACTS} is not available")
    db = tmp_path_factory.mktemp("ja") / "ja.duckdb"
    pools = JUDGEACTS / "data/derived/main.jsonl"
    code = ingest.main([
        "judgeacts", "--pools", str(pools),
        "--run", f"qwen={JUDGEACTS / 'runs/qwen_main.jsonl'}",
        "--run", f"smol={JUDGEACTS / 'runs/smol_main.jsonl'}",
        "--run", f"qwen8b={JUDGEACTS / 'runs/extension/qwen8b_mlx_main.jsonl'}",
        "--scores", f"clip={JUDGEACTS / 'results/main/clip_scores.json'}",
        "--db", str(db), "--dataset", "main",
    ])
    assert code == 0
    con = store.connect(db, read_only=True)
    data = load_selection_data(con, "main")
    con.close()
    order = [json.loads(line)["prompt_id"] for line in pools.read_text().splitlines() if line.strip()]
    return audit_selection(in_file_order(data, order), Resampling(10_000, STUDY_SEED))


@pytest.mark.parametrize("policy", sorted(PUBLISHED_POLICIES))
def test_policy_estimates_match_the_published_study(result, policy: str) -> None:
    row = result.policies.set_index("policy").loc[policy]
    for column, value in PUBLISHED_POLICIES[policy].items():
        tol = 5e-4 if policy == "clip" else TOL
        assert row[column] == pytest.approx(value, abs=tol), (policy, column)


def test_judge_behaviour_matches_the_published_study(result) -> None:
    judges = result.judges.set_index("judge")
    for judge, values in PUBLISHED_JUDGES.items():
        for column, value in values.items():
            assert judges.loc[judge, column] == pytest.approx(value, abs=TOL), (judge, column)
    pooled = result.positions[result.positions["m"].isna()].set_index(["judge", "slot"])
    for judge, shares in PUBLISHED_SLOTS.items():
        for slot, share in shares.items():
            assert pooled.loc[(judge, slot), "share"] == pytest.approx(share, abs=TOL)
    generators = result.generators.set_index(["judge", "source_model"])
    for key, share in PUBLISHED_GENERATORS.items():
        assert generators.loc[key, "share"] == pytest.approx(share, abs=TOL)
        assert generators.loc[key, "uniform"] == pytest.approx(PUBLISHED_UNIFORM[key[1]], abs=TOL)


def test_readme_headlines(result) -> None:
    table = result.policies.set_index("policy")
    judges = result.judges.set_index("judge")
    assert round(table.loc["qwen", "gain"], 3) == 0.039
    assert round(table.loc["clip", "gain"], 3) == 0.069
    assert round(100 * judges.loc["qwen", "first_slot"], 1) == 48.8
    assert round(100 * judges.loc["qwen", "first_slot_uniform"], 1) == 27.8
    assert round(100 * judges.loc["qwen", "flip_rate"], 1) == 59.7
    assert round(100 * table.loc["qwen agree>=3/3", "coverage"], 1) == 40.3
    assert round(table.loc["qwen agree>=3/3", "gain"], 3) == 0.141


# Published 95% intervals (summary.json `*_ci`), printed in full: (policy, stat) -> (lo, hi).
PUBLISHED_INTERVALS = {
    ("random", "utility"): (0.712691550925926, 0.7470509837962964),
    ("random", "regret"): (0.1860901041666667, 0.21282216435185186),
    ("random", "worst_group_regret"): (0.231712962962963, 0.31215277777777767),
    ("oracle", "gain"): (0.1860901041666667, 0.21282216435185186),
    ("qwen", "regret"): (0.13613819444444444, 0.18444444444444444),
    ("qwen", "gain"): (0.016376099537037034, 0.06164843749999999),
    ("qwen", "utility"): (0.7418888888888889, 0.7963333333333333),
    ("qwen", "best"): (0.4533333333333333, 0.5666666666666667),
    ("qwen", "random_regret"): (0.1860901041666667, 0.21282216435185186),
    ("qwen", "bmr_delta"): (-0.11777777777777776, -0.016388888888888873),
    ("qwen", "worst_group_regret"): (0.20555555555555555, 0.3847222222222222),
    ("qwen majority", "regret"): (0.1135277777777778, 0.15594444444444444),
    ("qwen majority", "gain"): (0.04313408564814814, 0.08622459490740743),
    ("smol agree>=3/3", "regret"): (0.06547619047619048, 0.36904761904761907),  # the gate keeping 7 prompts
    ("smol agree>=3/3", "gain"): (-0.10763888888888888, 0.19990079365079363),
    ("smol agree>=3/3", "bmr_delta"): (-0.28571428571428564, 0.4166666666666667),
    ("smol agree>=3/3", "worst_group_regret"): (0.5, 0.5),
    ("qwen+smol agree", "regret"): (0.18714689265536724, 0.3163841807909605),
    ("qwen+smol agree", "gain"): (-0.11140830979284369, -0.011064030131826745),
    ("qwen+smol agree", "worst_group_regret"): (0.35714285714285715, 0.7083333333333334),
    ("qwen+smol agree rejected", "regret"): (0.11410788381742738, 0.16276020055325036),
    ("qwen+smol agree rejected", "worst_group_regret"): (0.18166666666666664, 0.3181982872200262),
    ("qwen agree>=3/3 rejected", "regret"): (0.18412476722532586, 0.25242085661080077),
    ("qwen agree>=3/3 rejected", "worst_group_regret"): (0.27564102564102566, 0.503968253968254),
}
PUBLISHED_ERROR_INTERVALS = {  # the same, on cultural-error ratings
    ("oracle", "stereotype_delta"): (-0.03437511574074073, -0.006207754629629635),
    ("qwen", "stereotype_delta"): (0.0023327546296296317, 0.045116319444444435),
    ("qwen", "missing_explicit_delta"): (-0.08426435185185184, -0.026282175925925917),
    ("qwen+smol agree", "image_quality_delta"): (-0.20662664783427498, -0.10104755178907723),
    ("smol agree>=3/3", "stereotype_delta"): (-0.09325396825396824, 0.14285714285714285),
    # decomposition.json: the pools sensitive to missing explicit elements
    ("qwen", "missing_explicit_sensitive_delta"): (-0.09158212560386472, -0.029321910225442907),
    ("qwen agree>=2/3", "missing_explicit_sensitive_delta"): (-0.1775445987654321, -0.11121250000000003),
}
PUBLISHED_BONFERRONI = {
    ("qwen", "missing_explicit_delta"): (-0.08977511574074074, -0.019557754629629505),
    ("qwen", "missing_explicit_sensitive_delta"): (-0.09793088264895329, -0.02207276570048306),
    ("oracle", "stereotype_delta"): (-0.03734108796296296, -0.0029079861111109824),
}
# (slice, value, policy) -> {column: published}; country.json and robustness.json
PUBLISHED_SLICES = {
    ("country", "Brazil", "qwen"): {"n": 30, "regret_lo": 0.058055555555555555, "regret_hi": 0.1802777777777778,
                                    "gain_lo": -7.291666666663938e-05, "gain_hi": 0.10877372685185187,
                                    "random_regret_lo": 0.13786921296296295, "random_regret_hi": 0.20588020833333334},
    ("country", "Brazil", "qwen agree>=2/3"): {"n": 28, "regret_lo": 0.036309523809523805, "regret_hi": 0.1577380952380952},
    ("consensus", "high", "qwen"): {"n": 138, "regret": 0.13810386473429953, "regret_lo": 0.1060371376811594,
                                    "regret_hi": 0.17240338164251207, "gain_lo": 0.014325935990338151,
                                    "gain_hi": 0.07923447564412234},
    ("consensus", "high", "random"): {"n": 138, "regret_lo": 0.16408451590177128, "regret_hi": 0.2068294585346215},
    ("consensus", "low", "qwen agree>=3/3"): {"n": 61, "regret_lo": 0.04508196721311475, "regret_hi": 0.11133879781420762},
    ("consensus", "low", "smol"): {"n": 161, "regret_lo": 0.265527950310559, "regret_hi": 0.3385093167701863},
    ("best", "unique", "qwen agree>=3/3"): {"n": 80, "gain_lo": 0.12682291666666665, "gain_hi": 0.20963541666666666},
    ("best", "unique", "smol"): {"n": 178, "regret_lo": 0.30641385767790263, "regret_hi": 0.3766385767790262},
}
PUBLISHED_SLICE_ERRORS = {
    ("country", "Brazil", "qwen"): (-0.04814814814814815, 0.05314930555555554),
    ("consensus", "high", "qwen"): (0.004115338164251219, 0.0632548309178744),
    ("best", "unique", "qwen"): (-0.012431898403928778, 0.040170349907918984),
}


@pytest.mark.parametrize(("table", "tol"), [(PUBLISHED_INTERVALS, ALIGNMENT_TOL), (PUBLISHED_ERROR_INTERVALS, ERROR_TOL)])
def test_intervals_are_the_published_ones(result, table, tol) -> None:
    policies = result.policies.set_index("policy")
    for (policy, stat), (lo, hi) in table.items():
        assert policies.loc[policy, f"{stat}_lo"] == pytest.approx(lo, abs=tol), (policy, stat)
        assert policies.loc[policy, f"{stat}_hi"] == pytest.approx(hi, abs=tol), (policy, stat)
    for (policy, stat), (lo, hi) in PUBLISHED_BONFERRONI.items():
        assert policies.loc[policy, f"{stat}_lo_bonf"] == pytest.approx(lo, abs=ERROR_TOL), (policy, stat)
        assert policies.loc[policy, f"{stat}_hi_bonf"] == pytest.approx(hi, abs=ERROR_TOL), (policy, stat)


def test_slices_and_their_intervals_are_the_published_subsets(result) -> None:
    rows = result.slices.set_index(["slice", "value", "policy"])
    for key, values in PUBLISHED_SLICES.items():
        for column, value in values.items():
            assert rows.loc[key, column] == pytest.approx(value, abs=ALIGNMENT_TOL), (key, column)
    for key, (lo, hi) in PUBLISHED_SLICE_ERRORS.items():
        assert (rows.loc[key, "stereotype_delta_lo"], rows.loc[key, "stereotype_delta_hi"]) == \
            pytest.approx((lo, hi), abs=ERROR_TOL), key
    # robustness.json: 138 high- and 162 low-consensus prompts (median 0.0417), 181 with a unique best
    assert result.slice_prompts["consensus"] == {"high": 138, "low": 162}
    assert result.slice_prompts["best"] == {"unique": 181, "tied": 119}
    groups = result.groups.set_index(["policy", "country"])
    assert groups.loc[("qwen", "Brazil"), "regret_lo"] == pytest.approx(0.058055555555555555, abs=ALIGNMENT_TOL)
