"""Uses of a tagged corpus: verifier error breakdowns (more analyses live beside this one)."""

from taxonomy.analysis.breakdown import (
    ALL,
    JoinReport,
    capability_breakdown,
    capability_frame,
    gap_table,
    join_report,
    join_verdicts,
    paired_test,
    side_by_side,
    to_markdown,
    write_csv,
)
from taxonomy.analysis.verdicts import (
    VerdictError,
    devai_drift,
    load_devai_judgments,
    load_paperbench_grades,
    load_verdict_table,
    load_verdicts,
    parse_verdict,
)

__all__ = [
    "ALL",
    "JoinReport",
    "VerdictError",
    "capability_breakdown",
    "capability_frame",
    "devai_drift",
    "gap_table",
    "join_report",
    "join_verdicts",
    "load_devai_judgments",
    "load_paperbench_grades",
    "load_verdict_table",
    "load_verdicts",
    "paired_test",
    "parse_verdict",
    "side_by_side",
    "to_markdown",
    "write_csv",
]
