"""Who may open what (issue 25 item 5): a name on this machine; from others, a secret one can revoke.

On this machine only (the server listens on a loopback address: `localhost`, 127.0.0.1 or ::1, the
default of .streamlit/config.toml) nothing is asked: every page opens, and the Annotate page asks who
rates. When the server listens on another address (`--server.address 0.0.0.0`), everyone it lets in
holds a secret that can be revoked, and it is checked again on every page run:

- the Annotate page opens only with a valid annotator token (`?token=`, from `python -m runners.campaign
  invite`; `audit_core.campaigns.token_holder`, hashes only, `campaign revoke`), and the token names the
  campaign and the annotator: it opens that campaign's Annotate page and nothing else;
- every other page opens only with a valid viewer secret (`?key=`, from `python -m runners.access grant`;
  `audit_core.store.viewer_keys`, hashes only, `access revoke`), kept for the session once shown, so the
  page menu's links (which drop the query) still open; a visit or session that showed an annotator token
  is refused there even with a key, and sees no page menu.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import streamlit as st

from audit_core.store import viewer_keys

TOKEN = "token"  # the URL parameter of an annotator's secret link
KEY = "key"  # the URL parameter of a viewer's secret link
ANNOTATE = "annotate"  # the page a token opens
_SHOWN = "_annotator_token"  # session state: the token this session showed, kept across its pages
_KEY = "_viewer_key"  # session state: the viewer secret this session showed
LOCAL_NAMES = frozenset({"localhost"})
NO_SECRET = "This server is open to other machines: open the link you were given."


def serves_network(address: str | None) -> bool:
    """Whether a server listening on `address` can be reached from other machines: anything but a
    loopback address or `localhost` (an empty address listens on every interface)."""
    text = (address or "").strip().strip("[]")
    if text.lower() in LOCAL_NAMES:
        return False
    try:
        return not ipaddress.ip_address(text).is_loopback
    except ValueError:  # empty (every interface) or a host name: reachable from elsewhere
        return True


def listening_addresses() -> set[str] | None:
    """The local addresses of this process's listening TCP sockets, from /proc (Linux); None where /proc
    cannot say. Sockets are matched to the process by inode, so other processes' servers do not count."""
    try:
        inodes = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
        found = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: listening
                    found.add(_proc_address(fields[1].rsplit(":", 1)[0]))
        return found
    except (OSError, IndexError, ValueError):
        return None


def _proc_address(hexed: str) -> str:
    """An address as /proc/net/tcp* writes it (32-bit words in host order, little-endian here) as text."""
    raw = bytes.fromhex(hexed)
    return str(ipaddress.ip_address(b"".join(raw[k:k + 4][::-1] for k in range(0, len(raw), 4))))


def on_network() -> bool:
    """Whether this server can be reached from other machines: by `server.address` when it is set
    (`serves_network`); unset, Streamlit listens on every interface, so by what this process listens on
    (no listening socket, as under AppTest: no) and, where /proc cannot say, yes."""
    address = st.get_option("server.address")
    if address:
        return serves_network(address)
    listening = listening_addresses()
    return listening is None or any(serves_network(a) for a in listening)


def shown_token() -> str | None:
    """The annotator token this visit carries (the URL's `token`) or this session showed before; None
    when neither. Remembered for the session, so a page reached from the Annotate page is refused too."""
    token = st.query_params.get(TOKEN)
    if token:
        st.session_state[_SHOWN] = token
    return st.session_state.get(_SHOWN)


def viewer() -> str | None:
    """The name of the viewer whose valid secret this visit carries (the URL's `key`) or this session showed
    before, checked now against the viewer secrets' file (`audit_core.store.viewer_keys.holder`); None when
    there is none, or it is not valid (unknown, revoked, malformed)."""
    key = st.query_params.get(KEY)
    if key:
        st.session_state[_KEY] = key
    shown = st.session_state.get(_KEY)
    return viewer_keys.holder(shown) if shown else None


def shows_menu() -> bool:
    """Whether this visit sees the menu of pages: always on this machine; from others, a viewer's only."""
    return not on_network() or (shown_token() is None and viewer() is not None)


def guard(page: str) -> None:
    """Stop `page` (a page key of app.py) with one line unless this visit may open it (module docstring).
    The Annotate page checks its token itself (`app_ui.annotate_views`)."""
    if page == ANNOTATE or not on_network():
        return
    if shown_token() is not None:
        st.error("An annotator's link opens its campaign's Annotate page only. Use the link you were given.",
                 icon=":material/lock:")
        st.stop()
    if viewer() is None:
        st.error(NO_SECRET, icon=":material/lock:")
        st.stop()
