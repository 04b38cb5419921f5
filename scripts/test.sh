#!/usr/bin/env bash
# Set up on first run (test and model dependencies; torch installs from this machine's disk)
# and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
exec .venv/bin/python -m pytest "$@"
