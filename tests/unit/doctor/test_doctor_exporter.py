"""The exporter link of `gpudash doctor` from canned /metrics pages: the bundled exporter (with its NVML
self-metrics) and dcgm-exporter, reachable or not, serving GPUs or not, every field the dashboards read or not.
"""

from __future__ import annotations

from typing import Any

from gpudash.doctor.diagnose import exporters_findings
from gpudash.doctor.expect import Expectations
from gpudash.doctor.exporter import exporter_findings
from gpudash.doctor.findings import Finding, Verdict
from gpudash.doctor.observed import ExporterPage, metrics_url, parse_exposition

NOW = 1_800_000_000.0


def failed(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.verdict is Verdict.FAIL]


# ------------------------------------------------------------------------------------------------ exporter

GPU_LABELS = 'gpu="{n}",UUID="GPU-{n}",hostname="node-1"'


def exposition(expect: Expectations, gpus: int = 2, *, drop: tuple[str, ...] = (), extra: str = "",
               self_metrics: bool = True, up: tuple[int, ...] = (), sweep_age: float = 0.5, pending: int = 0) -> str:
    lines = []
    for key in expect.used_by:
        name = expect.profile.ref(key).name
        if name in drop or key in ("xid_total", "process_fb_used"):
            continue
        lines += [f"{name}{{{GPU_LABELS.format(n=n)}}} {0 if key == 'gpu_up' and n in up else 1}" for n in range(gpus)]
    if self_metrics:
        lines += ['gpudash_exporter_collection_errors_total{field="pcie_tx"} 0',
                  f"gpudash_exporter_last_sweep_timestamp_seconds {NOW - sweep_age}",
                  f"gpudash_exporter_fields_pending {pending}"]
    return "\n".join(lines) + "\n" + extra


def page(text: str, **kw: Any) -> ExporterPage:
    return ExporterPage("http://node-1:9400/metrics", parse_exposition(text), fetched_at=NOW, **kw)


def test_a_healthy_exporter_serves_gpus_nvml_and_every_field(expect: Expectations) -> None:
    found = exporter_findings(page(exposition(expect, 3)), expect)
    assert [(f.verdict, f.what) for f in found] == [
        (Verdict.OK, "gpudash exporter: 3 GPUs (0, 1, 2)"),
        (Verdict.OK, "NVML healthy: last sweep 0.5 s ago, no failed reads"),
        (Verdict.OK, f"every field the dashboards and rules read ({len(expect.used_by)})"),
    ]


def test_an_exporter_that_does_not_answer_is_the_broken_link(expect: Expectations) -> None:
    (finding,) = exporter_findings(ExporterPage("http://node-1:9400/metrics", error="connection refused"), expect)
    assert (finding.verdict, finding.subject, finding.what) == (
        Verdict.FAIL, "node-1:9400", "cannot read /metrics: connection refused")
    assert "curl http://node-1:9400/metrics" in finding.fix


def test_a_discovered_exporter_out_of_reach_from_here_but_scraped_is_only_a_hint(expect: Expectations) -> None:
    down = ExporterPage("http://node-1:9400/metrics", error="no route to host", discovered=True)
    assert exporter_findings(down, expect, scraped_up=True)[0].verdict is Verdict.HINT
    assert exporter_findings(down, expect, scraped_up=False)[0].verdict is Verdict.FAIL


def test_no_gpu_series_names_nvml_and_the_container_toolkit(expect: Expectations) -> None:
    text = "gpudash_exporter_collection_errors_total{field=\"gpu_util\"} 3\nDCGM_FI_DEV_SM_CLOCK 0\n"
    (finding,) = exporter_findings(page(text), expect)
    assert finding.verdict is Verdict.FAIL
    assert finding.what == "gpudash exporter answers with no GPU series (DCGM_FI_DEV_GPU_UTIL)"
    assert "NVIDIA Container Toolkit" in finding.why and "nvidia-smi" in finding.fix


def test_another_exporter_on_the_port_is_named(expect: Expectations) -> None:
    (finding,) = exporter_findings(page("node_load1 0.5\n"), expect)
    assert finding.what == "answers, but with no GPU metric at all"


def test_a_lost_gpu_and_a_stale_sweep_fail_nvml(expect: Expectations) -> None:
    lost = exporter_findings(page(exposition(expect, 4, up=(2,))), expect)
    assert failed(lost)[0].what == "NVML cannot read GPU 2 (gpudash_gpu_up 0)"
    stale = exporter_findings(page(exposition(expect, sweep_age=300)), expect)
    assert failed(stale)[0].what == "last clean NVML sweep 300 s ago"


def test_failed_reads_are_a_hint_naming_the_fields(expect: Expectations) -> None:
    text = exposition(expect).replace('errors_total{field="pcie_tx"} 0', 'errors_total{field="pcie_tx"} 4')
    nvml = exporter_findings(page(text), expect)[1]
    assert nvml.verdict is Verdict.HINT and nvml.what.endswith("failed reads since start: pcie_tx (4)")


def test_missing_fields_fail_when_default_and_wait_while_pending(expect: Expectations) -> None:
    text = exposition(expect, drop=("DCGM_FI_DEV_FB_FREE",))
    (missing,) = failed(exporter_findings(page(text), expect))
    assert missing.what == "missing 1 fields the dashboards read: DCGM_FI_DEV_FB_FREE"
    assert "GPU fleet /" in missing.why
    waiting = exporter_findings(page(exposition(expect, drop=("DCGM_FI_DEV_FB_FREE",), pending=3)), expect)[-1]
    assert waiting.verdict is Verdict.HINT and waiting.what.endswith("3 fields still pending")


def test_a_field_the_exporter_calls_not_supported_is_a_hint_not_a_failure(expect: Expectations) -> None:
    name = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"  # an H200 without NVLink: NVML answers NotSupported
    said = "".join(f'gpudash_exporter_field_unsupported{{{GPU_LABELS.format(n=n)},field="{name}"}} 1\n'
                   for n in (1, 0))
    found = exporter_findings(page(exposition(expect, drop=(name,), extra=said)), expect)
    assert not failed(found)
    fields, unsupported = found[-2:]
    assert fields.verdict is Verdict.OK and fields.what.endswith(f"({len(expect.used_by) - 1} the GPUs support)")
    assert unsupported.verdict is Verdict.HINT
    assert unsupported.what == f"not supported on this GPU: {name} (GPU 0, 1)"
    assert "NVLink traffic by cluster" in unsupported.why
    # another missing field still fails beside it
    both = exporter_findings(page(exposition(expect, drop=(name, "DCGM_FI_DEV_FB_FREE"), extra=said)), expect)
    assert [f.what for f in failed(both)] == ["missing 1 fields the dashboards read: DCGM_FI_DEV_FB_FREE"]


def test_a_counter_written_without_total_counts_as_published(expect: Expectations) -> None:
    # dcgm-exporter types DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS a counter without the _total suffix
    name = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    assert "remapped_rows_unc" in expect.used_by  # GPUEccUncorrectable reads it
    text = exposition(expect, drop=(name,), extra=f"# TYPE {name} counter\n{name}{{{GPU_LABELS.format(n=0)}}} 0\n")
    assert name in page(text).samples  # kept under the name as written
    assert not failed(exporter_findings(page(text), expect))


def test_dcgm_exporter_gets_no_nvml_line_and_a_counters_fix(expect: Expectations) -> None:
    text = exposition(expect, self_metrics=False, drop=("DCGM_FI_DEV_MAX_SM_CLOCK",))
    found = exporter_findings(page(text), expect)
    assert [f.what.split(":")[0] for f in found] == [
        "dcgm-exporter", "missing optional fields DCGM_FI_DEV_MAX_SM_CLOCK"]
    assert found[1].verdict is Verdict.HINT and "counters file" in found[1].fix
    assert "GPU node / SM clock" in found[1].why


def test_many_exporters_without_news_are_one_line(expect: Expectations) -> None:
    pages = [page(exposition(expect)) for _ in range(5)]
    pages.append(ExporterPage("http://node-9:9400/metrics", error="connection refused"))
    found = exporters_findings(pages, expect, {})
    assert [(f.verdict.value, f.subject) for f in found] == [("ok", "5 of 6 exporters"), ("FAIL", "node-9:9400")]
    assert len(exporters_findings(pages[:2], expect, {})) == 6  # a few: every line


def test_metrics_url_accepts_an_address() -> None:
    assert metrics_url("node-1:9400") == "http://node-1:9400/metrics"
    assert metrics_url("https://node-1:9400") == "https://node-1:9400/metrics"
    assert metrics_url("http://node-1:9400/custom") == "http://node-1:9400/custom"


def test_a_counter_written_without_total_is_published(expect: Expectations) -> None:
    # dcgm-exporter's remapped-row counters are TYPE counter without `_total`; the parser renames their samples.
    name = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    assert "remapped_rows_unc" in expect.used_by  # the health ledger reads it
    typed = exposition(expect).replace(f"{name}{{", f"# TYPE {name} counter\n{name}{{", 1)
    assert name in parse_exposition(typed)  # kept under the name as written
    assert failed(exporter_findings(page(typed), expect)) == []
    gone = exposition(expect, drop=(name,))
    (missing,) = failed(exporter_findings(page(gone), expect))
    assert missing.what == f"missing 1 fields the dashboards read: {name}"


def test_a_counter_keeps_the_name_the_exporter_wrote() -> None:
    # dcgm-exporter's counters have no `_total` suffix (or an upper-case one); the parser would add one.
    text = ("# TYPE DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL counter\nDCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{gpu=\"0\"} 5\n"
            "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter\nDCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\"} 1\n"
            "# TYPE gpudash_xid_errors_total counter\ngpudash_xid_errors_total{gpu=\"0\",xid=\"13\"} 2\n")
    samples = parse_exposition(text)
    assert set(samples) == {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                            "gpudash_xid_errors_total"}
    assert samples["DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"][0].value == 5


def test_per_link_nvlink_series_are_not_missing_by_default(expect: Expectations) -> None:
    # the bundled exporter publishes them only with --nvlink-per-link; rules and panels read the totals then
    assert "nvlink_link_errors" in expect.used_by
    text = exposition(expect, drop=("gpudash_nvlink_errors_total", "gpudash_nvlink_link_up"))
    assert exporter_findings(page(text), expect)[-1].what.startswith("every field the dashboards and rules read")


def test_the_last_xid_time_of_an_exporter_that_saw_no_xid_is_not_missing(expect: Expectations) -> None:
    # the bundled exporter writes the time of the last XID only once a GPU had one, like the XID counters
    assert "xid_last_time" in expect.used_by
    text = exposition(expect, drop=("gpudash_xid_last_timestamp_seconds",))
    assert [f.what for f in exporter_findings(page(text), expect)][-1].startswith(
        "every field the dashboards and rules read")
