"""Judge Audit: browse what VLM judges returned, against held-out human ratings.

`streamlit run app.py` opens the built-in demo (data/demo.duckdb, or the file
named by $JUDGE_AUDIT_DB). The sidebar picks the database, dataset and focus
judge; every page keeps its view in the URL, so a link restores it. A link to the
app's root may name its page as `?page=explorer` (or detail, judges, gates, findings).
"""

from __future__ import annotations

import streamlit as st

from app_ui import context

# Page files live in app_pages/, not pages/: Streamlit would serve a pages/ directory's
# files on their own (without this script's sidebar) to sessions that open a page URL first.
PAGES: dict[str, tuple[str, str, str]] = {
    # URL key: (file, title, icon)
    "overview": ("app_pages/overview.py", "Overview", ":material/dashboard:"),
    "explorer": ("app_pages/explorer.py", "Prompt explorer", ":material/grid_view:"),
    "detail": ("app_pages/detail.py", "Pool detail", ":material/image_search:"),
    "judges": ("app_pages/judges.py", "Judge comparison", ":material/compare:"),
    "gates": ("app_pages/gates.py", "Gate lab", ":material/filter_alt:"),
    "findings": ("app_pages/findings.py", "Findings", ":material/description:"),
}

st.set_page_config(page_title="Judge Audit", page_icon=":material/gavel:", layout="wide")
pages = {
    key: st.Page(path, title=title, icon=icon, url_path=key, default=key == "overview")
    for key, (path, title, icon) in PAGES.items()
}
current = st.navigation(list(pages.values()))
requested = st.query_params.get("page")
if current is pages["overview"] and requested in pages and requested != "overview":
    # A link to the app's root names its page in the query: go there, keeping the query.
    st.switch_page(pages[requested], query_params={k: st.query_params.get_all(k) for k in st.query_params})
context.sidebar()
current.run()
