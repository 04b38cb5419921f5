"""Serve Judge Audit with a warm start: `streamlit run serve.py [-- --db PATH ... --data-dir DIR]`.

The same app as `streamlit run app.py` (same arguments, pages and URLs), started through
Streamlit's `st.App`, whose lifespan imports the pages' modules and loads the view a bare link
opens before the server listens (`app_ui.warm`): the first visit then neither imports nor loads.
"""

import streamlit as st

from app_ui.warm import lifespan

app = st.App("app.py", lifespan=lifespan)
