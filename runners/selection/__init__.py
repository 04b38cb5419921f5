"""Selector judges: what they are shown (`protocol`: instructions, requests, keys) and how
their raw text becomes a pick (`parsing`). Their calls are recorded by `runners.recording`.
"""
