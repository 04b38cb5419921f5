"""Where things are, defined once: the repository, the app, and the shared JudgeActs files beside it."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # tests/support/paths.py -> the repository
APP = str(REPO / "app.py")
APP_PAGES = [p.stem for p in (REPO / "app_pages").glob("*.py")]
SHARED_DATA = REPO.parent / "shared" / "data"  # the published study's files, beside the repository
JUDGEACTS = SHARED_DATA / "judgeacts"
JUDGEACTS_MAIN = JUDGEACTS / "main"
JUDGEACTS_DEV = JUDGEACTS / "dev"
