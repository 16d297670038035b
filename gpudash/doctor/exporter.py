"""Link 1, the exporter: reachable, serving GPUs, NVML healthy (its self-metrics), every field the
dashboards and rules read present. A dcgm-exporter target gets the same checks but NVML's (it has no
self-metrics; DCGM's health is its own).
"""

from __future__ import annotations

from gpudash.catalog import (
    BY_KEY,
    EXPORTER_ERRORS,
    EXPORTER_LAST_SWEEP,
    EXPORTER_PENDING,
    EXPORTER_UNSUPPORTED,
    PER_LINK_KEYS,
    UNSUPPORTED_FIELD_LABEL,
    Publisher,
    Signal,
)
from gpudash.doctor.expect import Expectations
from gpudash.doctor.findings import Finding, Link, count, fail, hint, listed, ok
from gpudash.doctor.observed import ExporterPage

# A sweep older than this means NVML calls keep failing (the fast loop runs every second by default).
STALE_SWEEP_S = 60.0
NO_NVML = ("the exporter found no GPU: the NVIDIA driver is not loaded here, or the container has no GPUs "
           "(NVIDIA Container Toolkit, `docker run --gpus all`)")
# Series that exist only once something happened (an XID, a process on the GPU): absent is not missing.
ON_EVENT = frozenset({"xid_total", "xid_last_time", "process_fb_used"})
# PER_LINK_KEYS: published only with --nvlink-per-link; rules and panels read the per-GPU totals without them.
NVML_FIX = "run `nvidia-smi` on the node; fix the driver or the container's GPU access, then restart the exporter"


def _subject(page: ExporterPage) -> str:
    return page.url.removesuffix("/metrics").split("://", 1)[-1]


def is_gpudash(page: ExporterPage) -> bool:
    """The bundled exporter (it publishes self-metrics); otherwise a dcgm-exporter or another exporter."""
    return EXPORTER_ERRORS in page.samples or EXPORTER_LAST_SWEEP in page.samples


def exporter_findings(page: ExporterPage, expect: Expectations, scraped_up: bool = False) -> list[Finding]:
    """`scraped_up`: Prometheus scrapes this target fine (then a failure from here is this machine's view)."""
    subject = _subject(page)
    if page.error:
        if page.discovered and scraped_up:
            return [hint(Link.EXPORTER, subject, f"not reachable from here ({page.error}); Prometheus scrapes it",
                         why="a firewall or network between this machine and the node")]
        return [fail(Link.EXPORTER, subject, f"cannot read /metrics: {page.error}",
                     why="no exporter runs on that address (the bundled one exits at start when NVML cannot load: no "
                         "driver, or a container without the NVIDIA Container Toolkit), or a firewall stops the port",
                     fix=f"on the node: `systemctl status gpudash-exporter` (or `gpudash exporter`; it says why "
                         f"it cannot start), then `curl {page.url}`")]
    kind = "gpudash exporter" if is_gpudash(page) else "dcgm-exporter"
    gpus = _gpus(page, expect)
    if not gpus:
        if not any(name.startswith(("DCGM_FI_", "nvidia_smi_")) for name in page.samples):
            return [fail(Link.EXPORTER, subject, "answers, but with no GPU metric at all",
                         why="this port serves another exporter, or the GPU exporter publishes nothing yet",
                         fix="point --exporter (or the scrape target) at the GPU exporter's port (9400)")]
        return [fail(Link.EXPORTER, subject, f"{kind} answers with no GPU series ({expect.gpu_metric})",
                     why=NO_NVML if kind == "gpudash exporter" else "dcgm-exporter cannot reach DCGM or its GPUs",
                     fix=NVML_FIX)]
    findings = [ok(Link.EXPORTER, subject, f"{kind}: {count(len(gpus), 'GPU')} ({listed(sorted(gpus, key=_num))})")]
    if kind == "gpudash exporter":
        findings.append(_nvml(page, subject))
    findings.extend(_fields(page, expect, subject, kind))
    return findings


def _num(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


def _gpus(page: ExporterPage, expect: Expectations) -> set[str]:
    label = expect.profile.gpu_label
    return {s.labels[label] for s in page.samples.get(expect.gpu_metric, ()) if label in s.labels}


def _nvml(page: ExporterPage, subject: str) -> Finding:
    up = BY_KEY["gpu_up"].dcgm_name
    lost = sorted((s.labels.get("gpu", "?") for s in page.samples.get(up, ()) if s.value == 0), key=_num)
    if lost:
        return fail(Link.EXPORTER, subject, f"NVML cannot read GPU {', '.join(lost)} ({up} 0)",
                    why="the GPU fell off the bus or NVML lost it (an XID 79 in `dmesg` says so)",
                    fix="`nvidia-smi -q` on the node; drain it and reset the GPU (`nvidia-smi -r`) or reboot")
    sweeps = page.samples.get(EXPORTER_LAST_SWEEP, ())
    age = max(0.0, page.fetched_at - sweeps[0].value) if sweeps else None  # clocks may differ a little
    if age is not None and age > STALE_SWEEP_S:
        return fail(Link.EXPORTER, subject, f"last clean NVML sweep {age:.0f} s ago",
                    why="NVML calls keep failing, so the exporter serves old values",
                    fix="the exporter's log (`journalctl -u gpudash-exporter`), then `nvidia-smi` on the node")
    errors = {s.labels.get("field", "?"): s.value for s in page.samples.get(EXPORTER_ERRORS, ()) if s.value > 0}
    swept = f"last sweep {age:.1f} s ago" if age is not None else "no sweep time published"
    if errors:
        fields = listed([f"{name} ({value:.0f})" for name, value in sorted(errors.items())])
        return hint(Link.EXPORTER, subject, f"NVML answers ({swept}); failed reads since start: {fields}",
                    why="a field that fails now and then is skipped for that sweep; one that always fails stays empty",
                    fix="the exporter's log names the NVML error")
    return ok(Link.EXPORTER, subject, f"NVML healthy: {swept}, no failed reads")


def _published(page: ExporterPage, name: str) -> bool:
    # The exposition parser names a counter's samples `<name>_total` even where the exporter writes them
    # without it (DCGM's remapped-row counters), as Prometheus stores them under the name as written.
    return name in page.samples or f"{name}_total" in page.samples


def unsupported_fields(page: ExporterPage) -> dict[str, list[str]]:
    """The GPUs (by index) on which the exporter says NVML does not support a field, by the field's name."""
    found: dict[str, list[str]] = {}
    for sample in page.samples.get(EXPORTER_UNSUPPORTED, ()):
        if sample.value and UNSUPPORTED_FIELD_LABEL in sample.labels:
            found.setdefault(sample.labels[UNSUPPORTED_FIELD_LABEL], []).append(sample.labels.get("gpu", "?"))
    return found


def _fields(page: ExporterPage, expect: Expectations, subject: str, kind: str) -> list[Finding]:
    own = kind == "gpudash exporter"  # gpudash's extras are not expected of another exporter
    absent = [BY_KEY[key] for key in expect.used_by
              if key not in ON_EVENT | PER_LINK_KEYS and not _published(page, expect.profile.ref(key).name)
              and (own or BY_KEY[key].publisher is not Publisher.GPUDASH)]
    cannot = unsupported_fields(page)
    missing = [s for s in absent if expect.profile.ref(s.key).name not in cannot]
    unsupported = [s for s in absent if s not in missing]
    hints = [_not_supported(expect, subject, unsupported, cannot)] if unsupported else []
    if missing:
        return [_missing(page, expect, subject, kind, missing), *hints]
    given = len(expect.used_by) - len(unsupported)
    return [ok(Link.EXPORTER, subject, f"every field the dashboards and rules read ({given}"
                                       f"{' the GPUs support' if unsupported else ''})"), *hints]


def _not_supported(expect: Expectations, subject: str, signals: list[Signal],
                   cannot: dict[str, list[str]]) -> Finding:
    """A hint, not a failure: the exporter says these fields are NotSupported on these GPUs."""
    names = [expect.profile.ref(s.key).name for s in signals]
    gpus = listed([f"{name} (GPU {', '.join(sorted(cannot[name], key=_num))})" for name in names])
    users = listed(list(dict.fromkeys(where for s in signals for where in expect.used_by[s.key])), 3)
    return hint(Link.EXPORTER, subject, f"not supported on this GPU: {gpus}",
                why=f"NVML answers NotSupported there (no NVLink, no profiling, no MIG); these stay empty: {users}",
                fix="nothing to fix: the panels that read them stay empty on this node")


def _missing(page: ExporterPage, expect: Expectations, subject: str, kind: str, missing: list[Signal]) -> Finding:
    needed = [s for s in missing if not s.optional]
    names = listed([expect.profile.ref(s.key).name for s in (needed or missing)])
    users = listed(list(dict.fromkeys(where for s in (needed or missing) for where in expect.used_by[s.key])), 3)
    pending = page.samples.get(EXPORTER_PENDING, ())
    if pending and pending[0].value > 0:
        return hint(Link.EXPORTER, subject, f"missing {names}; {pending[0].value:.0f} fields still pending",
                    why="rates (PCIe, GPM) need two reads of the exporter's slow loop after it starts",
                    fix="run doctor again in half a minute")
    fix = ("add them to dcgm-exporter's counters file (-f / DCGM_EXPORTER_COLLECTORS)" if kind == "dcgm-exporter"
           else "leave out `-f FILE` or add them to FILE; a field NVML does not support on this GPU stays empty")
    if needed:
        return fail(Link.EXPORTER, subject, f"missing {len(needed)} fields the dashboards read: {names}",
                    why=f"these stay empty: {users}", fix=fix)
    return hint(Link.EXPORTER, subject, f"missing optional fields {names}",
                why=f"outside dcgm-exporter's defaults; these stay empty: {users}", fix=fix)
