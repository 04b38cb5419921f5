"""Every importer and the table contract's validation: one reader per source (`judgeacts`,
`culturalframes`, `tables` for the table contract, `labelers`), strict field values (`values`),
images (`images`), the checks every input file passes before it is read (`input_files`), and
the one transaction that writes a validated dataset (`pools.write_dataset`).

Imports `audit_core.store`, the taxonomy and the leaves (`errors`, `user_text`); no judge
kind's audit, never streamlit, torch or runners.
"""
