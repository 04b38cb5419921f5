"""Rating campaigns (DESIGN §6): references collected in the app, blind, per pool, by several annotators.

`create_campaign` draws the items (`plans`) and assigns them; the Annotate page asks `next_item`,
shows the candidates in `shown_order` and calls `submit`, `skip` or `revise_last` (`annotation`),
each one transaction whose votes land in `votes` or the gold labels with the consensus
recomputed; `progress`, `reliability`, `annotator_agreement` and `median_seconds` (`measures`)
are the organiser's view; `invite`, `revoke` and `token_holder` (`access`) guard remote access.
Every function takes an open DuckDB connection; the contract is docs/campaigns.md.
"""

from audit_core.campaigns.access import invite, revoke, token_holder
from audit_core.campaigns.annotation import (
    Answer,
    last_rated,
    next_item,
    open_items,
    revise_last,
    shown_order,
    skip,
    submit,
)
from audit_core.campaigns.creation import create_campaign, draw_record, read_instructions
from audit_core.campaigns.export import export_table
from audit_core.campaigns.loading import list_campaigns, load_campaign, load_item, load_items
from audit_core.campaigns.measures import annotator_agreement, campaign_votes, median_seconds, progress, reliability
from audit_core.campaigns.records import TASKS, Campaign, CampaignError, Item, ScalePoint

__all__ = [
    "TASKS", "Answer", "Campaign", "CampaignError", "Item", "ScalePoint",
    "create_campaign", "draw_record", "read_instructions", "list_campaigns", "load_campaign", "load_item",
    "load_items", "next_item", "open_items", "last_rated", "shown_order", "submit", "skip", "revise_last",
    "progress", "reliability", "annotator_agreement", "median_seconds", "campaign_votes", "export_table",
    "invite", "revoke", "token_holder",
]
