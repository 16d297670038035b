"""Shared pieces of the end-to-end tests: static /metrics servers, dcgm-exporter-shaped output built from the
real samples, site configs, and a Prometheus started on the rules `gpudash rules` renders.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import yaml

from gpudash.catalog import JOB_INFO, MIG_INSTANCE_LABEL, PROMETHEUS_ALERTS, Publisher, profile
from gpudash.check.judge import GroupResult, Result, Status
from gpudash.check.queries import PANEL, VARIABLE
from gpudash.config.loading import Settings
from gpudash.infiniband import NIC_INFO, SERIES
from gpudash.promql.recordings import RECORDING_BY_NAME, signals_in
from gpudash.promql.scanner import filters, metric_names, offsets
from gpudash.stack.loopback import LoopbackHTTPServer
from support.cli import gpudash
from support.paths import ROOT


class StaticMetrics(LoopbackHTTPServer):
    """A tiny stdlib HTTP server that answers /metrics with fixed bytes, as an exporter would."""

    def __init__(self, body: bytes, content_type: str = "text/plain; version=0.0.4; charset=utf-8") -> None:
        self.body = body
        self.content_type = content_type
        self.requests = 0

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        static = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                static.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", static.content_type)
                self.send_header("Content-Length", str(len(static.body)))
                self.end_headers()
                self.wfile.write(static.body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler


# ------------------------------------------------------------------------ dcgm-exporter-shaped output

_LABELS = re.compile(r'(\w[\w-]*)="([^"]*)"')
# Plausible readings of a busy data-center GPU, in DCGM units; a 4 GB T400 gets its own memory figures.
_READINGS = {
    "DCGM_FI_DEV_SM_CLOCK": 1980, "DCGM_FI_DEV_MEM_CLOCK": 2619, "DCGM_FI_DEV_MEMORY_TEMP": 47,
    "DCGM_FI_DEV_GPU_TEMP": 44, "DCGM_FI_DEV_POWER_USAGE": 312.5, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 98765432,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0, "DCGM_FI_DEV_GPU_UTIL": 87, "DCGM_FI_DEV_MEM_COPY_UTIL": 35,
    "DCGM_FI_DEV_ENC_UTIL": 0, "DCGM_FI_DEV_DEC_UTIL": 0, "DCGM_FI_DEV_XID_ERRORS": 0,
    "DCGM_FI_DEV_FB_FREE": 24268, "DCGM_FI_DEV_FB_USED": 56400, "DCGM_FI_DEV_FB_RESERVED": 500,
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": 123456789, "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0.959228,
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.412, "DCGM_FI_PROF_DRAM_ACTIVE": 0.331,
    "DCGM_FI_PROF_PCIE_TX_BYTES": 151234567, "DCGM_FI_PROF_PCIE_RX_BYTES": 1203456789,
}
_SMALL_GPU = {"DCGM_FI_DEV_FB_FREE": 2700, "DCGM_FI_DEV_FB_USED": 1200, "DCGM_FI_DEV_POWER_USAGE": 11.568}
# DCGM DOUBLE fields, which dcgm-exporter prints with %f (sample block 5: 11.568000).
_DOUBLES = {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "DCGM_FI_PROF_DRAM_ACTIVE"}


def default_counters(reference: Path) -> list[tuple[str, str, str]]:
    """(field, type, help) of dcgm-exporter's default-counters.csv, label fields left out."""
    rows = []
    for line in (reference / "dcgm-exporter" / "default-counters.csv").read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, kind, help_ = (part.strip() for part in line.split(",", 2))
        if kind != "label":
            rows.append((name, kind, help_))
    return rows


def sample_label_sets(reference: Path) -> dict[str, list[list[tuple[str, str]]]]:
    """Real per-GPU label sets from exposition-samples.txt: `Hostname` (block 3, two H100s in Kubernetes
    mode, one of them allocated to a pod) and `hostname` (block 2a, dcgm-exporter's own server test)."""
    text = (reference / "dcgm-exporter" / "exposition-samples.txt").read_text()
    legacy = [_LABELS.findall(line) for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    current = [_LABELS.findall(line) for line in text.splitlines()
               if line.startswith("TEST_METRIC{gpu=") and 'UUID="' in line]
    return {"Hostname": legacy, "hostname": current}


def dcgm_shaped(reference: Path, host_label: str) -> bytes:
    """Every default counter, for every GPU label set of one host-label spelling, as dcgm-exporter writes it."""
    label_sets = sample_label_sets(reference)[host_label]
    assert label_sets, f"no {host_label} label sets found in exposition-samples.txt"
    out = []
    for name, kind, help_ in default_counters(reference):
        out.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}\n")
        for labels in label_sets:
            small = any(k == "modelName" and "T400" in v for k, v in labels)
            value = (_SMALL_GPU if small else {}).get(name, _READINGS[name])
            pairs = list(labels)
            if name == "DCGM_FI_DEV_XID_ERRORS":  # dcgm-exporter's XID attributes (sample block 4)
                pairs += [("err_code", "0"), ("err_msg", "Unknown Error")]
            text = f"{value:f}" if name in _DOUBLES else f"{value:g}" if isinstance(value, float) else str(value)
            out.append(f"{name}{{{','.join(f'{k}={chr(34)}{v}{chr(34)}' for k, v in pairs)}}} {text}\n")
    return "".join(out).encode()


# ------------------------------------------------------------------------ configs and the rules CLI


def site_yaml(path: Path, cluster: str, targets: Sequence[str], *, interval: str = "1s", webhook: str | None = None,
              metric_profile: str = "dcgm") -> Path:
    data: dict[str, Any] = {
        "profile": metric_profile,
        "scrape": {"interval": interval, "timeout": interval},
        "clusters": [{"name": cluster, "targets": [{"address": t} for t in targets]}],
    }
    if webhook:
        data["receivers"] = [{"name": "test-hook", "type": "webhook", "url": webhook}]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def gpudash_rules(out: Path, site: Path, thresholds: Path | None = None) -> dict[str, str]:
    """Run `gpudash rules --out DIR` as a person would; return the files it wrote, by relative path."""
    args = ["rules", "--out", str(out), "--site", str(site)]
    if thresholds is not None:
        args += ["--thresholds", str(thresholds)]
    done = gpudash(*args, cwd=ROOT)
    assert done.code == 0, done.err
    return {str(p.relative_to(out)): p.read_text() for p in out.rglob("*.yml")}


def local_settings(settings: Settings, **site_changes: Any) -> Settings:
    return replace(settings, site=replace(settings.site, **site_changes))


# ------------------------------------------------------------------------ judging check results


def panel_results(results: Sequence[GroupResult]) -> list[Result]:
    return [r for g in results for r in g.results if r.query.kind in (PANEL, VARIABLE)]


def _reads_a_list(expr: str) -> bool:
    return any(name in RECORDING_BY_NAME and RECORDING_BY_NAME[name].filtered for name in metric_names(expr))


# Series that are no GPU signal and exist only on some sites: who holds a job (an exporter that publishes it), the
# fabric's ports (a node with an RDMA port). `gpudash check` calls their absence optional.
_NOT_EVERYWHERE = frozenset({JOB_INFO, NIC_INFO} | {name for name, _, _ in SERIES})


def unexplained(results: Sequence[GroupResult], metric_profile: str = "dcgm") -> list[str]:
    """Dashboard queries without data for a reason the test does not accept, as readable lines.

    Accepted: data; `optional` only when the query reads a signal outside dcgm-exporter's defaults;
    `needs history` only with an offset; `nothing matches now` only with a filtering comparison or a recorded
    list (recorded with only the GPUs that pass its test) or on MIG instance series (none where no GPU is
    partitioned); `no jobs`
    (the job label's queries where no series carries it); `not firing` only where it reads Prometheus' ALERTS.
    """
    prof = profile(metric_profile)
    bad = []
    for r in panel_results(results):
        signals = signals_in(r.query.expr, prof)
        ok = (r.status is Status.OK
              or (r.status is Status.OPTIONAL and any(s.publisher is not Publisher.DCGM_DEFAULT for s in signals))
              or (r.status is Status.OPTIONAL and bool(_NOT_EVERYWHERE & set(metric_names(r.query.expr))))
              or (r.status is Status.NEEDS_HISTORY and bool(offsets(r.query.expr)))
              or (r.status is Status.NOTHING_MATCHES and (filters(r.query.expr) or _reads_a_list(r.query.expr)
                                                          or f'{MIG_INSTANCE_LABEL}!=""' in r.query.expr))
              or r.status is Status.NO_JOBS
              or (r.status is Status.NOT_FIRING and PROMETHEUS_ALERTS in metric_names(r.query.expr)))
        if not ok:
            bad.append(f"{r.query.source} / {r.query.item} [{r.query.ref}]: {r.status.value}: {r.detail} "
                       f"-- {r.query.expr}")
    return bad


def statuses(results: Sequence[GroupResult]) -> Mapping[str, list[str]]:
    by: dict[str, list[str]] = {}
    for r in panel_results(results):
        by.setdefault(r.status.name, []).append(f"{r.query.source} / {r.query.item}")
    return by
