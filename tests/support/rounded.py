"""promtool cases whose expected values hold on every Prometheus release.

promtool compares a case's values exactly, and releases differ in the last binary digit of the same rate: 3.x's
range selectors leave out the sample at the window's start, so `rate()` extrapolates by another factor (100 B/s
comes out as 99.99999999999999). A case made `rounded` compares the expression and its expected values both
rounded to a millionth; the rounding drops the metric name, so the expected labels do too.
"""

from __future__ import annotations

import re
from typing import Any

DIGITS = 6
_NAMED = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(?=\{)")


def rounded(case: dict[str, Any]) -> dict[str, Any]:
    scale = f"1e{DIGITS}"
    return {**case, "expr": f"round(({case['expr']}) * {scale}) / {scale}",
            "exp_samples": [{**s, "labels": _NAMED.sub("", s["labels"]), "value": round(float(s["value"]), DIGITS)}
                            for s in case["exp_samples"]]}
