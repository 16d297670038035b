"""Proposing thresholds from a fleet's own history: levels grown from the workload, not from a template.

Each proposal reads one statistic of the fleet, per GPU model where the series carry `modelName`, over the
history asked, one day per range-query step (so the answer stays small however large the fleet):

- GPU and HBM temperature while busy (utilization above the idle level): the 99th percentile across GPUs of
  each GPU's daily 99th percentile. A fleet that runs hot under normal work gets a warning level above that
  (plus a margin), so normal work does not page; the critical level stays at least `CRITICAL_GAP` above it.
  thresholds.yaml holds one level for every model, so the hottest model decides, and the reason says which.

Every proposal carries one line of reasoning; a value that needs no change is not proposed. A sample that is not
a finite number (+Inf, -Inf or NaN, from a broken sensor or an exporter's bad read) says nothing about the
fleet's temperature and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpudash.catalog import profile as catalog_profile
from gpudash.check.prometheus_api import QueryError, TimeRange
from gpudash.config.loading import Settings
from gpudash.errors import RemoteError

MODEL_LABEL = "modelName"
MARGIN_C = 3.0  # the warning sits this far above the busy 99th percentile
CRITICAL_GAP_C = 5.0
SUBQUERY_STEP = "1m"
DAY = 86400


class Queries(Protocol):
    def range(self, expr: str, window: TimeRange) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Proposal:
    path: tuple[str, ...]
    old: float
    new: float
    reason: str

    @property
    def key(self) -> str:
        return ".".join(self.path)

    def value_text(self) -> str:
        return f"{self.new:g}"


def busy_percentile(client: Queries, metric: str, util: str, idle: float, start: float, end: float) -> dict[str, float]:
    """Per model, the 99th percentile across GPUs of each GPU's daily 99th percentile while busy (max over days)."""
    days = max(1, math.ceil((end - start) / DAY))
    step = math.ceil((end - start) / days)
    inner = f"quantile_over_time(0.99, ({metric} and {util} > {idle:g})[{step}s:{SUBQUERY_STEP}])"
    expr = f"quantile by ({MODEL_LABEL}) (0.99, {inner})"
    try:
        result = client.range(expr, TimeRange(end, step * (days - 1), step))
    except QueryError as exc:
        raise RemoteError(f"tune: reading {metric} while busy: {exc}") from None
    out: dict[str, float] = {}
    for series in result:
        model = series.get("metric", {}).get(MODEL_LABEL, "") or "all GPUs"
        values = [float(v) for _, v in series.get("values", []) if math.isfinite(float(v))]
        if values:
            out[model] = max(values)
    return out


def _temperature(client: Queries, settings: Settings, start: float, end: float, key: str, sensor: str,
                 warning: float, critical: float, section: str) -> list[Proposal]:
    prof = catalog_profile(settings.site.profile)
    if not prof.has(key) or not prof.has("gpu_util"):
        return []
    metric, util = prof.ref(key).name, prof.ref("gpu_util").name
    by_model = busy_percentile(client, metric, util, settings.thresholds.utilization.idle_below_percent, start, end)
    if not by_model:
        return []
    model, hottest = max(by_model.items(), key=lambda kv: kv[1])
    seen = ", ".join(f"{m} {v:g} C" for m, v in sorted(by_model.items()))
    proposed = float(math.ceil(hottest + MARGIN_C))
    if proposed <= warning:
        return []
    out = [Proposal((section, f"{sensor}_warning_celsius"), warning, proposed,
                    f"busy {sensor.upper()} temperature p99 is {hottest:g} C on {model} ({seen}): a warning at "
                    f"{warning:g} C pages on normal work; {MARGIN_C:g} C above it warns only when it runs hotter")]
    if critical < proposed + CRITICAL_GAP_C:
        out.append(Proposal((section, f"{sensor}_critical_celsius"), critical, proposed + CRITICAL_GAP_C,
                            f"kept {CRITICAL_GAP_C:g} C above the proposed warning ({proposed:g} C)"))
    return out


def propose(client: Queries, settings: Settings, start: float, end: float) -> list[Proposal]:
    t = settings.thresholds.temperature
    return [*_temperature(client, settings, start, end, "gpu_temp", "gpu", t.gpu.warning, t.gpu.critical,
                          "temperature"),
            *_temperature(client, settings, start, end, "hbm_temp", "hbm", t.hbm.warning, t.hbm.critical,
                          "temperature")]


def changes(proposals: Sequence[Proposal]) -> dict[tuple[str, ...], str]:
    return {p.path: p.value_text() for p in proposals}
