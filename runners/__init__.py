"""Record what judges did; never compute an audit statistic.

The commands users call stay here: `python -m runners.X` for `demo`, `ingest`, `run_judge`,
`run_rater`, `run_labeler`, `score`, `analyze` and `report` (`command` turns a job's outcome
into an exit status, `audits` runs a dataset's audits for analyze and report). Beneath them:
`recording` (what every judge kind shares), one package per kind (`selection`, `rating`,
`labels`), `backends` (prompt and images in, text out) and `demo` (the simulated datasets);
data files live in `instructions/`, `conditions/`, `taxonomies/`, `templates/`, `judges/`.

May import `audit_core`, `findings` (for the report commands) and model libraries (in
`backends`); never streamlit or the app.
"""
