"""`python -m runners.access`: grant prints a secret once with its link, list never shows one, revoke stops it;
bad input is one line, exit status 2."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import parse_qs, urlparse

from audit_core.store import viewer_keys
from tests.support.paths import REPO


def access(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.access", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_grant_list_and_revoke():
    granted = access("grant", "--name", "erin", "--host", "audit.lan", "--port", "8600")
    assert granted.returncode == 0, granted.stderr
    link = next(line for line in granted.stdout.splitlines() if line.startswith("link: ")).removeprefix("link: ")
    assert link.startswith("http://audit.lan:8600/?key=")
    secret = parse_qs(urlparse(link).query)["key"][0]
    assert viewer_keys.holder(secret) == "erin"
    listed = access("list")
    assert listed.returncode == 0 and "erin" in listed.stdout and secret not in listed.stdout
    revoked = access("revoke", "--name", "erin")
    assert revoked.returncode == 0 and "1 secret revoked" in revoked.stdout
    assert viewer_keys.holder(secret) is None


def test_bad_input_is_one_line_and_exit_2():
    for args in (("grant", "--name", " "), ("grant",), ("forget",)):
        result = access(*args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr
