"""Doctor's findings as text, one line each in the order of the chain, or as JSON for machines."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from gpudash.doctor.findings import Finding, Verdict


def line(finding: Finding) -> str:
    text = f"{finding.verdict.value:<4}  {finding.link.value:<9} {finding.subject}: {finding.what}"
    if finding.why:
        text += f"; why: {finding.why}"
    if finding.fix:
        text += f"; fix: {finding.fix}"
    return text


def summary(findings: Sequence[Finding]) -> str:
    verdicts = Counter(f.verdict for f in findings)
    broken = list(dict.fromkeys(f.link.value for f in findings if f.failed))
    hints = f"{verdicts[Verdict.HINT]} hint{'' if verdicts[Verdict.HINT] == 1 else 's'}"
    head = f"doctor: {verdicts[Verdict.OK]} ok, {hints}, {verdicts[Verdict.FAIL]} failed"
    return f"{head} ({', '.join(broken)})" if broken else f"{head}: every link checked holds"


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps({
        "ok": not any(f.failed for f in findings),
        "findings": [{"link": f.link.value, "verdict": f.verdict.value, "subject": f.subject, "what": f.what,
                      "why": f.why, "fix": f.fix} for f in findings],
    }, indent=2)
