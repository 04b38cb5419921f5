"""What every test shares: a configuration folder of the session's own, never the user's; and the app's data
folder on the test databases, for the tests that open the app (the app's and the findings').

Helpers that are not fixtures live in tests/support/."""

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


@pytest.fixture
def data_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app may open the test databases: they live in its data folder, pytest's base temp folder.
    Modules whose tests open the app on them use it for every test
    (`pytestmark = pytest.mark.usefixtures("data_folder")`)."""
    monkeypatch.setenv("JUDGE_AUDIT_DATA_DIR", str(tmp_path_factory.getbasetemp()))
    monkeypatch.delenv("JUDGE_AUDIT_DB", raising=False)
