"""The rating audit as a loadable result: a store built through the real ingest and rating paths.

`build_rating_db` (tests/support/rating_db.py, also used by the app's tests) writes dataset 'rate':
24 items, two annotator pools (a: three identical integer votes per item; b: agrees with a on two
items in three, mirrors it elsewhere, with one annotator off by one on odd items), a culture
attribute, and four rating judges recorded by `record_rater`: `copy` (pool a's consensus exactly),
`constant` (always 3, except one raw output of HTML and script that fails to parse), `unsure`
(abstains where the pools disagree; two conditions) and `tilted`.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest

from audit_core import Resampling, store
from audit_core.ingest.pools import write_dataset
from audit_core.rating.audit import (
    RATING_COLUMNS,
    audit_rating,
    item_detail,
    load_rating_data,
    rating_distribution,
)
from tests.support.pools import make_pool_set, write_tiny_dataset
from tests.support.rating_db import (
    DATASET,
    HTML_ITEM,
    HTML_OUTPUT,
    build_rating_db,
    rating_votes,
    write_runs_on_two_scales,
)

RESAMPLES = 200
CONTRACT = {  # issue 9 item 5: column names are a contract
    "alignment": ("judge", "condition", "pool", "group", "n", "abstained", "mae", "mae_lo", "mae_hi", "pearson",
                  "pearson_lo", "pearson_hi", "qwk", "floor_share", "pool_floor_share"),
    "tilt": ("judge", "condition", "pool_a", "pool_b", "group", "delta", "delta_lo", "delta_hi", "tilt", "tilt_lo",
             "tilt_hi", "n_tilt"),
    "reliability": ("pool", "outcome", "alpha_ordinal", "alpha_interval", "n_items", "n_annotators"),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("rating")
    return build_rating_db(tmp / "r.duckdb", tmp / "images")


@pytest.fixture(scope="module")
def data(db):
    con = store.connect(db, read_only=True)
    try:
        return load_rating_data(con, DATASET)
    finally:
        con.close()


@pytest.fixture(scope="module")
def result(data):
    return audit_rating(data, Resampling(RESAMPLES, 3))


def wide_consensus(data) -> pd.DataFrame:
    return data.consensus.pivot(index="candidate_id", columns="pool", values="value")


def test_loads_votes_ratings_items_scale_and_images(data):
    assert data.scale == (1, 5) and data.outcome == "rubric" and data.pools == ["a", "b"]
    assert data.raters == [("constant", "default"), ("copy", "default"), ("tilted", "default"),
                           ("tilted", "insider_persona"), ("unsure", "default"), ("unsure", "insider_persona")]
    assert list(data.ratings.columns) == list(RATING_COLUMNS) and len(data.ratings) == 6 * 24
    assert set(data.items.columns) == {"candidate_id", "category", "culture"}
    assert data.items.set_index("candidate_id").loc["p000_flux", "culture"] == "east"
    wide = wide_consensus(data)  # votes-only pools: consensus = mean of the pool's votes
    assert wide.loc["p000_flux", "b"] == pytest.approx((2 + 2 + 3) / 3)
    assert all(Path(p).is_file() for p in data.image_paths.values())


def test_copy_of_pool_a_has_mae_zero_against_a_and_full_tilt_toward_it(data, result):
    rows = result.alignment.set_index(["judge", "condition", "pool", "group"])
    a = rows.loc[("copy", "default", "a", "all")]
    assert (a["n"], a["abstained"], a["mae"], a["mae_lo"], a["mae_hi"]) == (24, 0, 0.0, 0.0, 0.0)
    assert a["pearson"] == pytest.approx(1.0) and a["qwk"] == pytest.approx(1.0)
    wide = wide_consensus(data)
    b = rows.loc[("copy", "default", "b", "all")]
    assert b["mae"] == pytest.approx((wide["a"] - wide["b"]).abs().mean())
    tilt = result.tilt.set_index(["judge", "condition", "group"]).loc[("copy", "default", "all")]
    assert (tilt["pool_a"], tilt["pool_b"]) == ("a", "b")
    assert tilt["tilt"] == tilt["tilt_lo"] == tilt["tilt_hi"] == 1.0
    assert tilt["n_tilt"] == int(((wide["a"] - wide["b"]).abs() > 1e-9).sum())
    assert tilt["delta"] == pytest.approx(-b["mae"])


def test_constant_rater_has_undefined_pearson_and_counts_its_parse_failure(result):
    rows = result.alignment.set_index(["judge", "condition", "pool", "group"])
    c = rows.loc[("constant", "default", "a", "all")]
    assert np.isnan(c["pearson"]) and np.isnan(c["pearson_lo"]) and np.isnan(c["pearson_hi"])
    assert c["qwk"] == pytest.approx(0.0)  # kappa is defined: no agreement beyond chance
    assert (c["n"], c["failed"]) == (23, 1)


def test_tables_keys_and_contract_columns(result):
    tables = result.tables()
    assert list(tables) == ["alignment", "tilt", "reliability", "pool_agreement", "wilcoxon"]
    for name, columns in CONTRACT.items():
        assert list(tables[name].columns[: len(columns)]) == list(columns), name
    assert set(result.alignment["group"]) >= {"all", "anchor=high", "anchor=low", "anchor=contested",
                                              "culture=east", "culture=west", "category=festivals"}
    assert result.alignment.attrs == {"resamples": RESAMPLES, "seed": 3}


def test_summary_is_json_with_null_for_undefined_pearson(result):
    summary = result.to_summary()
    text = json.dumps(summary, allow_nan=False)  # NaN would not be JSON
    back = json.loads(text)
    assert set(back) >= {"alignment", "tilt", "reliability", "resamples", "seed"}
    assert (back["resamples"], back["seed"]) == (RESAMPLES, 3)
    assert len(back["alignment"]) == len(result.alignment) and len(back["tilt"]) == len(result.tilt)
    constant = next(r for r in back["alignment"]
                    if (r["judge"], r["pool"], r["group"]) == ("constant", "a", "all"))
    assert constant["pearson"] is None and constant["n"] == 23
    copy = next(r for r in back["alignment"] if (r["judge"], r["pool"], r["group"]) == ("copy", "a", "all"))
    assert copy["mae"] == 0.0 and copy["pearson"] == pytest.approx(1.0)


def test_reliability_matches_the_krippendorff_package(data, result):
    rel = result.reliability.set_index("pool")
    for pool in ("a", "b"):
        matrix = data.votes[data.votes["pool"] == pool].pivot(index="annotator", columns="candidate_id", values="value")
        for level in ("ordinal", "interval"):
            expected = krippendorff.alpha(reliability_data=matrix.to_numpy(), level_of_measurement=level)
            assert rel.loc[pool, f"alpha_{level}"] == pytest.approx(expected, abs=1e-9)
    assert (rel.loc["b", "n_items"], rel.loc["b", "n_annotators"]) == (24, 3)
    wide = wide_consensus(data)
    (agreement,) = result.pool_agreement.itertuples()
    assert agreement.pearson == pytest.approx(np.corrcoef(wide["a"], wide["b"])[0, 1])


def test_rating_distribution_counts_every_point_abstention_and_failure(data):
    dist = rating_distribution(data)
    judged = dist[dist["source"] == "judge"].set_index(["judge", "condition", "point"])
    wide = wide_consensus(data)
    copied = wide["a"].round().astype(int).value_counts()
    for point in range(1, 6):
        assert judged.loc[("copy", "default", str(point)), "count"] == copied.get(point, 0)
    assert judged.loc[("constant", "default", "3"), "count"] == 23
    assert judged.loc[("constant", "default", "failed"), "count"] == 1
    unsure = data.ratings[(data.ratings["judge"] == "unsure") & (data.ratings["condition"] == "default")]
    assert judged.loc[("unsure", "default", "abstained"), "count"] == (unsure["status"] == "abstained").sum() > 0
    assert np.allclose(dist.groupby(["source", "judge", "condition", "pool"], dropna=False)["share"].sum(), 1.0)
    pooled = dist[dist["source"] == "pool"].set_index(["pool", "point"])
    rounded_b = np.floor(wide["b"] + 0.5).astype(int).value_counts()  # half up: 2.5 → 3
    assert [pooled.loc[("b", str(p)), "count"] for p in range(1, 6)] == [rounded_b.get(p, 0) for p in range(1, 6)]
    assert set(pooled.index.get_level_values("point")) == {"1", "2", "3", "4", "5"}


def test_item_detail_has_votes_consensus_and_every_raw_output(data):
    detail = item_detail(data, HTML_ITEM)
    assert set(detail) == {"item", "consensus", "votes", "ratings"}
    assert detail["item"].loc[0, "culture"] == "east" and detail["item"].loc[0, "prompt_id"] == "p003"
    assert detail["votes"].groupby("pool").size().to_dict() == {"a": 3, "b": 3}
    assert detail["consensus"]["votes"].tolist() == [3, 3]
    ratings = detail["ratings"].set_index(["judge", "condition"])
    assert len(ratings) == 6
    assert ratings.loc[("constant", "default"), "raw_output"] == HTML_OUTPUT
    assert ratings.loc[("constant", "default"), "status"] == "parse_fail"
    assert ratings.loc[("copy", "default"), "error_a"] == 0.0
    with pytest.raises(KeyError, match="no_such_item"):
        item_detail(data, "no_such_item")


def test_no_rating_data_for_a_selection_only_dataset_or_another_outcome(tmp_path, db):
    selection_only = tmp_path / "sel.duckdb"
    write_tiny_dataset(selection_only, tmp_path / "images")
    con = store.connect(selection_only, read_only=True)
    try:
        assert load_rating_data(con, "tiny") is None
    finally:
        con.close()
    con = store.connect(db, read_only=True)
    try:
        assert load_rating_data(con, DATASET, outcome="image_quality") is None  # its runs rate the rubric
    finally:
        con.close()


def test_votes_without_ratings_give_reliability_and_empty_alignment(tmp_path):
    pools = make_pool_set(tmp_path / "images", dataset="votes", n_prompts=3, pool_sizes=(2,))
    pools = replace(pools, votes=rating_votes(list(pools.candidates["candidate_id"])))
    write_dataset(tmp_path / "v.duckdb", pools)
    con = store.connect(tmp_path / "v.duckdb", read_only=True)
    try:
        data = load_rating_data(con, "votes")
    finally:
        con.close()
    result = audit_rating(data, Resampling(RESAMPLES))
    assert data.raters == [] and result.alignment.empty and result.tilt.empty
    assert list(result.reliability["pool"]) == ["a", "b"]
    assert json.dumps(result.to_summary(), allow_nan=False)
    dist = rating_distribution(data)
    assert set(dist["source"]) == {"pool"} and dist.groupby("pool")["count"].sum().tolist() == [6, 6]


def test_runs_recording_different_scales_are_refused_naming_both(tmp_path):
    dataset = write_runs_on_two_scales(tmp_path / "s.duckdb", tmp_path / "images")
    con = store.connect(tmp_path / "s.duckdb", read_only=True)
    try:
        with pytest.raises(ValueError, match=r"different scales \(0-10, 1-5\)"):
            load_rating_data(con, dataset)
    finally:
        con.close()
