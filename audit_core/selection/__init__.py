"""Selectors: one image picked out of a pool, audited against held-out ratings.

Data (`data`), presentation orders and their votes, policies, gates (order agreement,
cross-judge, composed), position bias and flips, slices, groups, cultural errors, timing, the
audit (`audit`) and what the pages browse. Imports `audit_core.stats`, `audit_core.store`;
never another judge kind, never streamlit, torch or runners.
"""
