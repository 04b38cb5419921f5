"""Viewer secrets (`audit_core.store.viewer_keys`): hashes only, a 0600 file, revocable, checked in
constant time on every call; a file that is not to be trusted makes no secret valid."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from audit_core.errors import InputError
from audit_core.store import viewer_keys


@pytest.fixture
def path(tmp_path):
    return tmp_path / "config" / "judge-audit" / "viewer-keys"


def test_a_granted_secret_names_its_viewer_and_only_its_hash_is_kept(path):
    secret = viewer_keys.grant("dana", path)
    assert viewer_keys.holder(secret, path) == "dana"
    text = path.read_text()
    assert secret not in text and viewer_keys.secret_sha256(secret) in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [(v.name, v.revoked_at) for v in viewer_keys.viewers(path)] == [("dana", None)]


def test_a_revoked_or_replaced_secret_no_longer_opens_anything(path):
    first = viewer_keys.grant("dana", path)
    second = viewer_keys.grant("dana", path)  # a new grant to a name revokes the earlier secret
    assert viewer_keys.holder(first, path) is None and viewer_keys.holder(second, path) == "dana"
    assert viewer_keys.revoke("dana", path) == 1 and viewer_keys.revoke("dana", path) == 0
    assert viewer_keys.holder(second, path) is None
    assert all(v.revoked_at for v in viewer_keys.viewers(path))


@pytest.mark.parametrize("value", ["", "x", "a" * 43, "a" * 10_000, "\x00", "\ud800", "../../etc/passwd", None, 7])
def test_anything_but_a_granted_secret_is_no_one(path, value):
    viewer_keys.grant("dana", path)
    assert viewer_keys.holder(value, path) is None


def test_a_file_that_is_not_to_be_trusted_makes_no_secret_valid(path):
    secret = viewer_keys.grant("dana", path)
    os.chmod(path, 0o666)  # writable by others: anyone could have added a hash
    assert viewer_keys.holder(secret, path) is None
    with pytest.raises(OSError, match="only you can write"):
        viewer_keys.viewers(path)
    os.chmod(path, 0o600)
    link = path.with_name("link")
    link.symlink_to(path)
    assert viewer_keys.holder(secret, link) is None
    path.write_text("not json")
    assert viewer_keys.holder(secret, path) is None


def test_a_blank_name_is_refused_and_the_file_unchanged(path):
    viewer_keys.grant("dana", path)
    before = path.read_bytes()
    with pytest.raises(InputError, match="--name"):
        viewer_keys.grant(" \u200b", path)
    assert path.read_bytes() == before


def test_grants_made_at_once_are_all_kept(path):
    secrets = {}
    threads = [threading.Thread(target=lambda k=k: secrets.__setitem__(k, viewer_keys.grant(f"v{k}", path)))
               for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert {viewer_keys.holder(s, path) for s in secrets.values()} == {f"v{k}" for k in range(8)}


def test_the_file_lives_in_the_users_configuration_folder():
    assert viewer_keys.keys_path({"XDG_CONFIG_HOME": "/cfg"}).as_posix() == "/cfg/judge-audit/viewer-keys"
    assert viewer_keys.keys_path({"XDG_CONFIG_HOME": "relative"}).parent.parent.name == ".config"
