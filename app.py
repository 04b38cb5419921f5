"""Judge Audit: browse what VLM judges returned, against held-out human ratings.

`streamlit run app.py [-- --db PATH ... --data-dir DIR]` opens the built-in demo
(data/demo.duckdb), or the first file named by `--db` or $JUDGE_AUDIT_DB. The
sidebar picks the database (only those allowed when the app was started, see
`app_ui.allowed`), dataset and focus judge; every page keeps its view in the URL,
so a link restores it. A link to the app's root may name its page as
`?page=explorer` (or detail, judges, gates, alignment, attributes, findings, annotate).
The Annotate page draws no sidebar: a blind rater sees no judge; who may open it, and
what an annotator's link may open, is `app_ui.access`'s.
"""

from __future__ import annotations

import logging

import streamlit as st

from app_ui import access, context

# Page files live in app_pages/, not pages/: Streamlit would serve a pages/ directory's
# files on their own (without this script's sidebar) to sessions that open a page URL first.
PAGES: dict[str, tuple[str, str, str]] = {
    # URL key: (file, title, icon)
    "overview": ("app_pages/overview.py", "Overview", ":material/dashboard:"),
    "explorer": ("app_pages/explorer.py", "Prompt explorer", ":material/grid_view:"),
    "detail": ("app_pages/detail.py", "Pool detail", ":material/image_search:"),
    "judges": ("app_pages/judges.py", "Judge comparison", ":material/compare:"),
    "gates": ("app_pages/gates.py", "Gate lab", ":material/filter_alt:"),
    "alignment": ("app_pages/alignment.py", "Alignment", ":material/balance:"),
    "attributes": ("app_pages/attributes.py", "Attributes", ":material/label:"),
    "findings": ("app_pages/findings.py", "Findings", ":material/description:"),
    "annotate": ("app_pages/annotate.py", "Annotate", ":material/rate_review:"),
}

st.set_page_config(page_title="Judge Audit", page_icon=":material/gavel:", layout="wide")
pages = {
    key: st.Page(path, title=title, icon=icon, url_path=key, default=key == "overview")
    for key, (path, title, icon) in PAGES.items()
}
# Served to other machines, only a viewer holding a secret sees the menu of pages (`app_ui.access`).
current = st.navigation(list(pages.values()), position="sidebar" if access.shows_menu() else "hidden")
requested = st.query_params.get("page")
if current is pages["overview"] and requested in pages and requested != "overview":
    # A link to the app's root names its page in the query: go there, keeping the query.
    st.switch_page(pages[requested], query_params={k: st.query_params.get_all(k) for k in st.query_params})
try:
    access.guard(current.url_path or "overview")
    if current is not pages["annotate"]:  # the sidebar names judges; a blind rater must not see one
        context.sidebar()
    current.run()
except Exception as err:  # st.stop() and reruns derive from BaseException and pass through
    # The traceback names server paths: it goes to the server's log, the visitor gets one line.
    logging.getLogger("judge_audit").exception("page %s failed", current.url_path or "overview")
    st.error(f"This page stopped on an unexpected error ({type(err).__name__}); the details are in the server's log. "
             "The other pages still work.")
