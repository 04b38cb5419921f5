"""Annotate: rate a campaign's items blind, one after another; and, for the organiser, how the campaign accrues.

An annotator opens `/annotate?campaign=C` (with `db` and `dataset` as elsewhere), gives a name (on this
machine) or follows a secret link (`&token=`, from another machine: `app_ui.access`), and rates: the
prompt and the images in the order drawn for them, the scale as buttons with keyboard shortcuts, skip,
change the last answer, a progress bar; they resume where they left off. No judge, pick, score,
generator or country, nor another annotator's answer, is read for this view (`app_ui.annotate_views`).
The Organiser view (on this machine, or from another with a viewer secret) shows items done per
annotator, Krippendorff's α per pool with its interval, each annotator's agreement with the rest,
median seconds, and a link to the audit.
"""

from __future__ import annotations

import streamlit as st

from app_ui import annotate_views as views
from app_ui.context import warn_refused
from audit_core.user_text import visible

st.title("Annotate")
view = views.view()
desk = views.desk(view)
warn_refused()
st.caption(visible(f"Campaign {desk.campaign.name} · {desk.campaign.task} · dataset {desk.campaign.dataset}"))
if view == "organiser":
    views.organiser(desk)
elif desk.annotator is not None:
    views.rate(desk)
