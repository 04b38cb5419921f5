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
- README.md (CLIP gain 0.069, first slot 48.8% vs 27.8%, flips 59.7%, 40.3% kept).
Their names map to ours: "Qwen agree 2/3" = `qwen agree>=2/3`, "Qwen unanimous" =
`qwen agree>=3/3`, "Qwen, not unanimous" = `qwen agree>=3/3 rejected`,
"Cross-model" = `qwen+smol agree`, "Qwen, judges disagree" = `qwen+smol agree rejected`.
The re-typed main split rounds rating fractions to 4 decimals, so values are compared
to 4 decimals (the study prints 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_core import store
from audit_core.analysis import audit
from audit_core.audit_data import load_audit_data
from runners import ingest

JUDGEACTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "judgeacts" / "main"
TOL = 5e-4

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
    code = ingest.main([
        "judgeacts", "--pools", str(JUDGEACTS / "data/derived/main.jsonl"),
        "--run", f"qwen={JUDGEACTS / 'runs/qwen_main.jsonl'}",
        "--run", f"smol={JUDGEACTS / 'runs/smol_main.jsonl'}",
        "--run", f"qwen8b={JUDGEACTS / 'runs/extension/qwen8b_mlx_main.jsonl'}",
        "--scores", f"clip={JUDGEACTS / 'results/main/clip_scores.json'}",
        "--db", str(db), "--dataset", "main",
    ])
    assert code == 0
    con = store.connect(db, read_only=True)
    data = load_audit_data(con, "main")
    con.close()
    return audit(data, resamples=4000, seed=0)


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


# Published 95% intervals (their seed 20261002, 10,000 resamples); ours differ only by
# resampling noise, so they are compared loosely.
PUBLISHED_INTERVALS = {
    ("random", "worst_group_regret"): (0.231713, 0.312153),
    ("qwen", "regret"): (0.136138, 0.184444),
    ("qwen", "gain"): (0.016376, 0.061648),
    ("qwen", "bmr_delta"): (-0.117778, -0.016389),
    ("qwen", "stereotype_delta"): (0.002333, 0.045116),
    ("qwen", "worst_group_regret"): (0.205556, 0.384722),
    ("qwen agree>=3/3", "gain"): (0.110394, 0.172549),
    ("smol", "gain"): (-0.093222, -0.052342),
    ("qwen+smol agree", "regret"): (0.187147, 0.316384),
}
PUBLISHED_BONFERRONI = {("qwen", "missing_explicit_delta"): (-0.089775, -0.019558)}


def test_intervals_agree_with_the_published_ones_up_to_resampling_noise(result) -> None:
    table = result.policies.set_index("policy")
    for (policy, stat), (lo, hi) in PUBLISHED_INTERVALS.items():
        assert table.loc[policy, f"{stat}_lo"] == pytest.approx(lo, abs=0.01), (policy, stat)
        assert table.loc[policy, f"{stat}_hi"] == pytest.approx(hi, abs=0.01), (policy, stat)
    for (policy, stat), (lo, hi) in PUBLISHED_BONFERRONI.items():
        assert table.loc[policy, f"{stat}_lo_bonf"] == pytest.approx(lo, abs=0.01)
        assert table.loc[policy, f"{stat}_hi_bonf"] == pytest.approx(hi, abs=0.01)
