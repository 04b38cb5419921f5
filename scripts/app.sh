#!/usr/bin/env bash
# Set up on first run, build the SIMULATED demo database if absent, audit it once into the
# cache beside it (data/demo_cache/: instant when nothing changed), open the app with its warm start
# (serve.py: the first visit neither imports the pages' modules nor loads the audit).
# Extra arguments go to `streamlit run` (e.g. --server.port 8502 --server.headless true).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
.venv/bin/python -m runners.demo --db data/demo.duckdb
for dataset in demo ratings-demo; do
    .venv/bin/python -m runners.analyze --db data/demo.duckdb --dataset "$dataset" --cache-only
done
exec .venv/bin/python -m streamlit run serve.py "$@"
