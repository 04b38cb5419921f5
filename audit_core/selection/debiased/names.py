"""Policy names of the debiased selectors, a contract shared with the audit's outputs and the app:
`{judge} borda`, `{judge} calibrated`, `{judge} plackett-luce`, `{judge} prior-corrected`."""

from __future__ import annotations

BORDA = "borda"
CALIBRATED = "calibrated"
PLACKETT_LUCE = "plackett-luce"
PRIOR_CORRECTED = "prior-corrected"
METHODS: tuple[str, ...] = (BORDA, CALIBRATED, PLACKETT_LUCE, PRIOR_CORRECTED)


def policy_name(judge: str, method: str) -> str:
    """`{judge} {method}` for one of METHODS."""
    if method not in METHODS:
        raise ValueError(f"unknown debiased method {method!r}; expected one of {', '.join(METHODS)}")
    return f"{judge} {method}"


def borda_name(judge: str) -> str:
    return policy_name(judge, BORDA)


def calibrated_name(judge: str) -> str:
    return policy_name(judge, CALIBRATED)


def plackett_luce_name(judge: str) -> str:
    return policy_name(judge, PLACKETT_LUCE)


def prior_corrected_name(judge: str) -> str:
    return policy_name(judge, PRIOR_CORRECTED)
