"""Who may open what (issue 25 item 5): a name on this machine, a campaign's secret link from others.

On this machine only (the server listens on a loopback address: `localhost`, 127.0.0.1 or ::1, the
default of .streamlit/config.toml) a name is enough: every page opens, and the Annotate page asks who
rates. When the server listens on another address (`--server.address 0.0.0.0`), the Annotate page
opens only with a valid token (`?token=`, from `python -m runners.campaign invite`; checked by
`audit_core.campaigns.token_holder`, which keeps hashes only and honours `campaign revoke`), and the
token names the campaign and the annotator: it opens that campaign's Annotate page and nothing else.
Every other page refuses a visit that carries a token, or that comes from a session which showed one,
and an annotator's session shows no page menu: a secret link never leads to the audit (judges, picks,
scores). Visitors without a token see the other pages as `--server.address` has always served them,
so open the server only to a network whose people may see the audit.
"""

from __future__ import annotations

import ipaddress

import streamlit as st

TOKEN = "token"  # the URL parameter of an annotator's secret link
ANNOTATE = "annotate"  # the page a token opens
_SHOWN = "_annotator_token"  # session state: the token this session showed, kept across its pages
LOCAL_NAMES = frozenset({"localhost"})


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


def on_network() -> bool:
    """Whether this server can be reached from other machines (`server.address`, `serves_network`)."""
    return serves_network(st.get_option("server.address"))


def shown_token() -> str | None:
    """The annotator token this visit carries (the URL's `token`) or this session showed before; None
    when neither. Remembered for the session, so a page reached from the Annotate page is refused too."""
    token = st.query_params.get(TOKEN)
    if token:
        st.session_state[_SHOWN] = token
    return st.session_state.get(_SHOWN)


def annotator_visit() -> bool:
    """Whether this is an annotator's visit from another machine: served on a network, with a token."""
    return on_network() and shown_token() is not None


def refuse_annotator_elsewhere(page: str) -> None:
    """Stop `page` (a page key of app.py) with one line when an annotator's token reaches it on a network:
    a secret link opens its campaign's Annotate page only."""
    if page != ANNOTATE and annotator_visit():
        st.error("An annotator's link opens its campaign's Annotate page only. Use the link you were given.",
                 icon=":material/lock:")
        st.stop()
