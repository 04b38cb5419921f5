"""Dataset composition per country and per generator, on built pools and on the published
JudgeActs main split (paper/generated/appendix_dataset.tex and appendix_generators.tex
of GitHub seochan99/JudgeActs; unique alignment-best n = 181 from appendix_robustness.tex)."""

from __future__ import annotations

import numpy as np
import pytest

from audit_core.selection.composition import composition_columns, composition_table
from tests.support.selection_data import make_data

NAN = np.nan


def test_composition_of_built_pools() -> None:
    h = np.array([
        [0.5, 0.5, 0.5, NAN],  # all tied
        [1.0, 1.0, 0.0, 0.5],  # best tied
        [0.0, 0.2, 1.0, 0.4],  # unique best
        [0.3, 0.9, 0.6, NAN],
    ])
    stereotype = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0], [0, NAN, 1, 0]], dtype=float)
    data = make_data(h, countries=["x", "x", "y", "y"], extra={"stereotype": stereotype})
    table = composition_table(data)
    assert table.columns.tolist() == composition_columns([3, 4])
    assert table[["level", "value"]].values.tolist() == [
        ["all", "all"], ["country", "x"], ["country", "y"],
        ["generator", "SD35"], ["generator", "flux"], ["generator", "gpt-image"], ["generator", "imagegen3"],
    ]
    rows = table.set_index(["level", "value"])
    every = rows.loc[("all", "all")]
    assert every[["prompts", "pools_m3", "pools_m4", "ties", "best_tied", "images"]].tolist() == [4, 2, 2, 1, 2, 14]
    # over candidates, not prompts: 7.4 / 14, where the mean of pool means would be 0.53125
    assert every["alignment_mean"] == pytest.approx(7.4 / 14)
    assert every["stereotype_mean"] == pytest.approx(4 / 13)  # one rating missing
    assert every["range_mean"] == pytest.approx((0 + 1 + 1 + 0.6) / 4)
    x = rows.loc[("country", "x")]
    assert x[["prompts", "pools_m3", "pools_m4", "ties", "best_tied", "images"]].tolist() == [2, 1, 1, 1, 2, 7]
    assert x["alignment_mean"] == pytest.approx(4 / 7) and x["stereotype_mean"] == pytest.approx(1 / 7)
    y = rows.loc[("country", "y")]
    assert y[["prompts", "ties", "best_tied"]].tolist() == [2, 0, 0] and y["range_mean"] == pytest.approx(0.8)
    # a generator: the pools holding its images, and its images only
    last = rows.loc[("generator", "imagegen3")]
    assert last[["prompts", "pools_m3", "pools_m4", "images"]].tolist() == [2, 0, 2, 2]
    assert last["alignment_mean"] == pytest.approx(0.45) and last["range_mean"] == pytest.approx(1.0)
    first = rows.loc[("generator", "SD35")]
    assert first["images"] == 4 and first["alignment_mean"] == pytest.approx(1.8 / 4)
    assert first["stereotype_mean"] == pytest.approx(0.5)


def test_composition_without_stereotype_ratings_or_countries() -> None:
    data = make_data(np.array([[0.2, 0.4, 0.6], [0.1, 0.1, 0.1]]), countries=[None, None])
    table = composition_table(data)
    assert table.columns.tolist() == composition_columns([3])
    assert table["stereotype_mean"].isna().all()
    assert table.loc[table["level"] == "country", ["value", "prompts", "ties"]].values.tolist() == [["", 2, 1]]


# appendix_dataset.tex: prompts, 3-image pools, 4-image pools, ties, mean alignment, mean range, stereotype
PUBLISHED_COUNTRIES = {
    "Brazil": (30, 11, 19, 1, 0.790, 0.410, 0.109), "Canada": (30, 7, 23, 1, 0.741, 0.454, 0.044),
    "Chile": (30, 8, 22, 3, 0.762, 0.378, 0.069), "China": (30, 14, 16, 1, 0.690, 0.389, 0.154),
    "Germany": (30, 13, 17, 2, 0.790, 0.339, 0.100), "India": (30, 7, 23, 0, 0.763, 0.369, 0.091),
    "Iran": (30, 8, 22, 1, 0.700, 0.514, 0.264), "Japan": (30, 10, 20, 1, 0.596, 0.503, 0.218),
    "Poland": (30, 10, 20, 0, 0.714, 0.467, 0.106), "South_Africa": (30, 12, 18, 1, 0.757, 0.418, 0.078),
}
PUBLISHED_GENERATORS = {  # appendix_generators.tex: images, mean alignment
    "Flux.1-Dev": (296, 0.639), "GPT-Image": (295, 0.854), "Imagen3": (211, 0.785), "SD-3.5-Large": (298, 0.660),
}


def test_published_composition(judgeacts) -> None:  # noqa: F811
    data, _ = judgeacts
    rows = composition_table(data).set_index(["level", "value"])
    for country, (prompts, m3, m4, ties, align, spread, stereo) in PUBLISHED_COUNTRIES.items():
        row = rows.loc[("country", country)]
        assert row[["prompts", "pools_m3", "pools_m4", "ties"]].tolist() == [prompts, m3, m4, ties], country
        assert [round(row[c], 3) for c in ("alignment_mean", "range_mean", "stereotype_mean")] == [align, spread, stereo]
    for generator, (images, align) in PUBLISHED_GENERATORS.items():
        row = rows.loc[("generator", generator)]
        assert row["images"] == images and round(row["alignment_mean"], 3) == align
    every = rows.loc[("all", "all")]
    assert every[["prompts", "pools_m3", "pools_m4", "images"]].tolist() == [300, 100, 200, 1100]
    assert every["prompts"] - every["best_tied"] == 181
