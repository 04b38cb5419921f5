"""What every test shares: a configuration folder of the session's own, never the user's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def own_config_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """XDG_CONFIG_HOME set to a folder of the session, for every test and every process a test starts,
    so the audit cache's key (`audit_core.store.install_key`) is never made in or read from ~/.config."""
    folder = tmp_path_factory.mktemp("config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(folder))
        yield folder
