"""What recording every judge kind shares: the recorder core, engines (local, Ray), the
database lock, conditions and instruction files, and the judge commands' flags.

Imports `audit_core` (store, records) and `runners.backends`; never a page.
"""
