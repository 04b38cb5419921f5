"""What the organiser sees of a campaign (DESIGN §4b, reliability within a pool): progress, Krippendorff's
alpha with a bootstrap interval over items, each annotator's agreement with the rest, and time per item.

Every measure reads the campaign's own votes (`campaign_votes`): those its rated submissions
stored, so imported votes in the same pool do not blur the reliability of what was collected.
A Krippendorff unit is a candidate image (alignment, rubric) or a (candidate, attribute) pair
(labels, whose values are the attribute's labels); alpha is interval-level for alignment and
rubric and nominal for labels. For units u with m_u ≥ 2 pairable values (n in all):

- interval: α = 1 − (n − 1) Σ_u [m_u SS_u / (m_u − 1)] / (n SS) (`audit_core.rating.reliability`);
- nominal: α = 1 − (n − 1) Σ_u Σ_c n_uc (m_u − n_uc) / (m_u − 1) / (n² − Σ_c n_c²),
  with n_uc the values of label c in unit u and n_c = Σ_u n_uc.

Both are ratios of sums over units, so the bootstrap resamples campaign items (a prompt's
candidates travel together in alignment) with `stats.bootstrap.resampled_sums` and recomputes
α from the weighted sums in each resample; the interval is the 95% percentile interval
(`stats.bootstrap.percentile_interval`), NaN with 0 resamples or nothing pairable.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from audit_core.campaigns.annotation import item_candidates_sql
from audit_core.campaigns.records import Campaign
from audit_core.stats.bootstrap import percentile_interval, resampled_sums
from audit_core.stats.resampling import Resampling
from audit_core.store.schema import OUTCOME_SCALES

VOTE_COLUMNS = ("item_id", "unit", "annotator", "value")


def campaign_votes(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> pd.DataFrame:
    """item_id, unit, annotator, value of every vote the campaign's rated submissions stored: unit is the
    candidate id (alignment, rubric; value a float) or "candidate|attribute" (labels; value the label)."""
    params = [campaign.dataset, campaign.name]
    if campaign.task == "labels":
        sql = ("SELECT candidate_id AS item_id, candidate_id || '|' || attribute AS unit, annotator, label AS value "
               "FROM campaign_labels WHERE dataset_id = ? AND campaign = ?")
    else:
        sql = ("SELECT i.item_id, v.candidate_id AS unit, v.annotator, v.value FROM campaign_submissions s "
               "JOIN campaign_items i ON i.dataset_id = s.dataset_id AND i.campaign = s.campaign AND "
               "i.item_id = s.item_id "
               f"JOIN candidates c ON c.dataset_id = i.dataset_id AND {item_candidates_sql(campaign)} "
               "JOIN votes v ON v.dataset_id = c.dataset_id AND v.candidate_id = c.candidate_id AND "
               "v.annotator = s.annotator AND v.outcome = ? AND v.pool = ? "
               "WHERE s.dataset_id = ? AND s.campaign = ? AND s.status = 'rated'")
        params = [campaign.outcome, campaign.pool, *params]
    return con.execute(sql + " ORDER BY item_id, unit, annotator", params).df().loc[:, list(VOTE_COLUMNS)]


def alpha_sums(votes: pd.DataFrame, level: str) -> tuple[np.ndarray, list[str]]:
    """(items × columns of additive sums, item ids) from which `alpha_from_sums` computes α (module docstring).

    interval columns: n, Σx, Σx², Σ_u m_u SS_u/(m_u − 1); nominal: n, Σ_u Σ_c n_uc (m_u − n_uc)/(m_u − 1),
    then n_c per label. Only units with at least two votes count.
    """
    m = votes.groupby("unit")["annotator"].transform("size")
    pairable = votes.loc[m >= 2].assign(m=m[m >= 2])
    items = sorted(votes["item_id"].unique())
    row = {item: k for k, item in enumerate(items)}
    index = pairable["item_id"].map(row).to_numpy(dtype=int)
    if level == "interval":
        x = pairable["value"].to_numpy(dtype=float)
        unit_mean = pairable.groupby("unit")["value"].transform("mean").to_numpy(dtype=float)
        within = pairable["m"].to_numpy() * (x - unit_mean) ** 2 / (pairable["m"].to_numpy() - 1)
        columns = [np.ones_like(x), x, x**2, within]
    else:
        n_uc = pairable.groupby(["unit", "value"])["annotator"].transform("size").to_numpy(dtype=float)
        m_u = pairable["m"].to_numpy(dtype=float)
        labels = sorted(pairable["value"].unique())
        columns = [np.ones(len(pairable)), (m_u - n_uc) / (m_u - 1)]  # Σ over a unit's votes of (m − n_uc)/(m − 1)
        columns += [(pairable["value"] == label).to_numpy(dtype=float) for label in labels]
    sums = np.zeros((len(items), len(columns)))
    for j, column in enumerate(columns):
        sums[:, j] = np.bincount(index, weights=column, minlength=len(items))
    return sums, items


def alpha_from_sums(totals: np.ndarray, level: str) -> np.ndarray:
    """α of each row of totals (column sums of `alpha_sums`); NaN where nothing is pairable or every value agrees."""
    totals = np.atleast_2d(totals)
    n = totals[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        if level == "interval":
            ss = totals[:, 2] - totals[:, 1] ** 2 / n
            alpha = 1 - (n - 1) * totals[:, 3] / (n * ss)
            alpha[~(ss > 1e-12 * np.maximum(totals[:, 2], 1))] = np.nan
        else:
            expected = n**2 - (totals[:, 2:] ** 2).sum(axis=1)
            alpha = 1 - (n - 1) * totals[:, 1] / expected
            alpha[~(expected > 0)] = np.nan
    alpha[~(n >= 2)] = np.nan
    return alpha


def reliability(con: duckdb.DuckDBPyConnection, campaign: Campaign, resampling: Resampling) -> pd.DataFrame:
    """pool, alpha, alpha_lo, alpha_hi, items_with_overlap (campaign items rated by at least two annotators)."""
    votes = campaign_votes(con, campaign)
    level = "nominal" if campaign.task == "labels" else "interval"
    raters = votes.groupby("item_id")["annotator"].nunique()
    row = {"pool": campaign.pool, "alpha": np.nan, "alpha_lo": np.nan, "alpha_hi": np.nan,
           "items_with_overlap": int((raters >= 2).sum())}
    if len(votes):
        sums, _ = alpha_sums(votes, level)
        row["alpha"] = float(alpha_from_sums(sums.sum(axis=0), level)[0])
        if resampling.resamples:
            lo, hi = percentile_interval(alpha_from_sums(resampled_sums(sums, resampling).totals, level))
            row["alpha_lo"], row["alpha_hi"] = float(lo[0]), float(hi[0])
    return pd.DataFrame([row])


def annotator_agreement(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> pd.DataFrame:
    """annotator, agreement_with_rest, n: over the n units an annotator voted on that others voted on too,
    alignment and rubric: 1 − mean |v − mean of the others' votes| / (hi − lo) of the outcome's scale;
    labels: mean share of the others' labels equal to the annotator's. 1 is full agreement; NaN when n = 0."""
    votes = campaign_votes(con, campaign)
    rows = []
    for annotator in sorted(votes["annotator"].unique()):
        own = votes.loc[votes["annotator"] == annotator, ["unit", "value"]]
        others = votes.loc[(votes["annotator"] != annotator) & votes["unit"].isin(own["unit"])]
        if campaign.task == "labels":
            same = others.merge(own, on="unit", suffixes=("", "_own"))
            per_unit = (same["value"] == same["value_own"]).groupby(same["unit"]).mean()
        else:
            lo, hi = OUTCOME_SCALES[campaign.outcome]
            rest = others.groupby("unit")["value"].mean()
            paired = own.set_index("unit")["value"].reindex(rest.index)
            per_unit = 1 - (paired - rest).abs() / (hi - lo)
        rows.append((annotator, float(per_unit.mean()) if len(per_unit) else np.nan, len(per_unit)))
    return pd.DataFrame(rows, columns=["annotator", "agreement_with_rest", "n"]).astype({"n": int})


def median_seconds(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> pd.DataFrame:
    """annotator, median_seconds: median of the seconds recorded with their rated submissions."""
    return con.execute(
        "SELECT annotator, median(seconds) AS median_seconds FROM campaign_submissions WHERE dataset_id = ? AND "
        "campaign = ? AND status = 'rated' GROUP BY annotator ORDER BY annotator",
        [campaign.dataset, campaign.name]).df()


def progress(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> pd.DataFrame:
    """annotator, pool, rated, skipped, target: one row per named annotator (or, in an open campaign, per
    annotator who acted); target is the items assigned to them, or the campaign's size in an open campaign
    (every item is offered to everyone until `overlap` annotators rated it)."""
    acted = con.execute(
        "SELECT annotator, count(*) FILTER (WHERE status = 'rated') AS rated, "
        "count(*) FILTER (WHERE status = 'skipped') AS skipped FROM campaign_submissions "
        "WHERE dataset_id = ? AND campaign = ? GROUP BY annotator", [campaign.dataset, campaign.name]).df()
    if campaign.annotators:
        targets = con.execute(
            "SELECT annotator, count(*) AS target FROM campaign_assignments WHERE dataset_id = ? AND campaign = ? "
            "GROUP BY annotator", [campaign.dataset, campaign.name]).df().set_index("annotator")["target"]
        names = list(campaign.annotators)
    else:
        names = sorted(acted["annotator"])
        targets = pd.Series(campaign.size, index=names, dtype=int)
    out = pd.DataFrame({"annotator": pd.Series(names, dtype=object)}).merge(
        acted.astype({"annotator": object}), on="annotator", how="left")
    out["pool"] = campaign.pool
    out["target"] = out["annotator"].map(targets).fillna(0)
    out[["rated", "skipped", "target"]] = out[["rated", "skipped", "target"]].fillna(0).astype(int)
    return out.loc[:, ["annotator", "pool", "rated", "skipped", "target"]]
