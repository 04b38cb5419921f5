"""Presentation without Streamlit: colours, figures and the self-contained report,
shared by the app's pages and `runners.report`."""
