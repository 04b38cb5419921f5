"""Two-pass pages: what reads at a glance first, the rest once the browser has painted it.

A page's first run in a session draws its headline, then calls `painted(page)`, which returns
False and mounts a tiny component. The browser runs the component's script when it mounts it,
after what the page drew before it; the script waits for that frame to be painted and sends a
trigger, which reruns the page. From then on, in that session, `painted(page)` is True and the
page draws everything at once. Charts and tables are what cost the browser most (plotly.js
alone takes over a second to evaluate here); held back until the cards are on screen, they no
longer hold the headline up.
"""

from __future__ import annotations

import streamlit as st
import streamlit.components.v2 as components

STATE = "_painted_pages"  # session state: the pages this session's browser has painted
# requestAnimationFrame runs just before a frame is painted; a task queued from it runs after.
_JS = """
export default function (component) {
  requestAnimationFrame(() => setTimeout(() => component.setTriggerValue("painted", true), 0));
}
"""
_MARKER = components.component("judge_audit.painted", js=_JS)


def painted(page: str) -> bool:
    """True when the browser of this session has painted `page`'s first pass; else False, after
    mounting the component whose trigger marks it painted and reruns the page."""
    done: set[str] = st.session_state.setdefault(STATE, set())
    if page in done:
        return True
    _MARKER(key=f"{STATE}.{page}", height=0, on_painted_change=lambda: done.add(page))
    return False
