"""A campaign's references as a table of the table contract (docs/table-contract.md), which
`python -m runners.ingest table` reads back: `--votes` rows for alignment and rubric campaigns,
`--labels` rows (the gold labels of the campaign's images) for labels campaigns."""

from __future__ import annotations

import duckdb
import pandas as pd

from audit_core.campaigns.measures import campaign_votes
from audit_core.campaigns.records import Campaign

VOTES_COLUMNS = ("candidate_id", "outcome", "pool", "annotator", "value")
LABELS_COLUMNS = ("candidate_id", "attribute", "label")


def export_table(con: duckdb.DuckDBPyConnection, campaign: Campaign) -> pd.DataFrame:
    """Votes (VOTES_COLUMNS: the campaign's own votes) or gold labels (LABELS_COLUMNS: the consensus label of
    every image the campaign labelled, as `gold_labels` holds it), sorted by their keys."""
    if campaign.task == "labels":
        return con.execute(
            "SELECT g.candidate_id, g.attribute, g.label FROM gold_labels g WHERE g.dataset_id = ? AND "
            "EXISTS (SELECT 1 FROM campaign_labels l WHERE l.dataset_id = g.dataset_id AND l.campaign = ? AND "
            "l.candidate_id = g.candidate_id AND l.attribute = g.attribute) ORDER BY g.candidate_id, g.attribute",
            [campaign.dataset, campaign.name]).df()
    votes = campaign_votes(con, campaign)
    out = votes.rename(columns={"unit": "candidate_id"}).assign(outcome=campaign.outcome, pool=campaign.pool)
    return out.loc[:, list(VOTES_COLUMNS)].sort_values(["candidate_id", "annotator"]).reset_index(drop=True)
