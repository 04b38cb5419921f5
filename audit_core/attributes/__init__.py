"""Attribute judges: closed label sets with an abstention label, audited against gold labels.

The taxonomy (`taxonomy`) and the audit under both abstention policies (`audit`).
Imports `audit_core.stats` and `audit_core.store`; never another judge kind.
"""
