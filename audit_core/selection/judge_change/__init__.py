"""Judge change (DESIGN §4e): a baseline and a candidate selector judge compared on the same pools.

- `pairing`: the two judges as one `SelectionData` (`pair_judges`, from one dataset or two with the
  same pools), the pair a comparison opens with (`default_pair`) and the gates applied to both
  (`standard_gates`, `parse_pair_gate`, `gate_label`);
- `paired`: paired differences candidate − baseline of every measure and policy both judges have,
  with one joint prompt-level bootstrap, and the prompts where their order-0 picks differ;
- `verdicts`: each gate's kept and rejected sides per judge and its verdict in words, by a rule
  that is data (`VerdictRule`);
- `checks`: small expressions over the results, read by a grammar of their own (`parse_check`);
- `poisson_path`: both tables above `poisson.POISSON_ABOVE` prompts, every interval from one pass of
  Poisson weights (DESIGN §4f);
- `comparison`: `compare_judges`, its typed result `JudgeChange` (`tables()`, `to_summary()`).

Imports `audit_core.selection` (data, measures, gates, gate_compose, policy_rows, position, votes),
`audit_core.stats` and the leaves `audit_core.errors`, `audit_core.user_text`; never streamlit,
torch or runners.
"""

from audit_core.selection.judge_change.checks import Check, CheckOutcome, default_checks, parse_check
from audit_core.selection.judge_change.comparison import JudgeChange, compare_judges
from audit_core.selection.judge_change.paired import COMPARE_COLUMNS, Disagreement, paired_differences
from audit_core.selection.judge_change.pairing import (
    ROLES,
    JudgePair,
    default_pair,
    gate_label,
    judge_policies,
    pair_judges,
    parse_pair_gate,
    standard_gates,
)
from audit_core.selection.judge_change.verdicts import (
    DISCARDS,
    FILTERS,
    GATE_COLUMNS,
    KEEPS_NOTHING,
    NO_EVIDENCE,
    REJECTS_NOTHING,
    VERDICTS,
    VerdictRule,
    gate_verdict,
    gate_verdicts,
)

__all__ = [
    "COMPARE_COLUMNS", "DISCARDS", "FILTERS", "GATE_COLUMNS", "KEEPS_NOTHING", "NO_EVIDENCE", "REJECTS_NOTHING",
    "ROLES", "VERDICTS", "Check", "CheckOutcome", "Disagreement", "JudgeChange", "JudgePair", "VerdictRule",
    "compare_judges", "default_checks", "default_pair", "gate_label", "gate_verdict", "gate_verdicts", "judge_policies",
    "paired_differences", "pair_judges", "parse_check", "parse_pair_gate", "standard_gates",
]
