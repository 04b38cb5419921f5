"""Raters: one image rated on a rubric, aligned against each annotator pool separately.

Consensus and reliability per pool (`reliability`), alignment, tilt and floor (`alignment`),
the rubric next to a content scorer, and the audit (`audit`). Imports `audit_core.stats`
and `audit_core.store`; never another judge kind, never streamlit, torch or runners.
"""
