"""What the app's pages share: the sidebar selection and URL state (`context`), which databases
may be opened (`allowed`), drawing helpers (`draw`, `glance`, `gate_views`, `rubric_views`),
two-pass pages (`painted`) and the warm start (`warm`).

May import `audit_core`, `findings`, streamlit and plotly; never `runners` or a model library.
Pages draw: every figure they show comes from `audit_core`.
"""
