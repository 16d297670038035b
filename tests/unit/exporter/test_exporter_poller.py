"""The poller with faults injected through the Source interface: each fault has its stated outcome."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpudash.deadline import within
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import STATIC_KEYS, Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource
from gpudash.exporter.source import COSTLY_KEYS, GpuIdentity, GpuReading

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Scripted:
    """A simulated node whose driver a test can make misbehave between sweeps."""

    def __init__(self, gpus: int = 3, faults: Sequence[str] = (), epoch: float = 0.0) -> None:
        self.inner = SimulatedSource(fleet_from_specs(gpus, seed=1, faults=faults, epoch=epoch))
        self.unsupported: dict[int, set[str]] = {}
        self.failing: dict[int, set[str]] = {}
        self.broken: set[int] = set()
        self.requests: list[tuple[int, frozenset[str]]] = []

    def driver_version(self) -> str:
        return self.inner.driver_version()

    def gpus(self) -> Sequence[GpuIdentity]:
        return self.inner.gpus()

    def costly_keys(self) -> frozenset[str]:
        return COSTLY_KEYS

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        self.requests.append((index, keys))
        if index in self.broken:
            raise RuntimeError("driver returned garbage")
        reading = self.inner.read(index, keys, now)
        if not reading.up:
            return reading
        unsupported = self.unsupported.get(index, set()) & keys
        errors = {key: "Unknown Error" for key in self.failing.get(index, set()) & keys}
        values = {k: v for k, v in reading.values.items() if k not in unsupported and k not in errors}
        return replace(reading, values=values, unsupported=reading.unsupported | unsupported, errors=errors)

    def close(self) -> None:
        self.inner.close()


def _poller(source: Scripted) -> Poller:
    return Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname="node")


def _sweep_all(poller: Poller, now: float) -> Samples:
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop, now)
    return _samples(poller)


def _samples(poller: Poller) -> Samples:
    text = "\n" + poller.exposition.body.decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            keep = tuple(sorted((k, v) for k, v in s.labels.items() if k in ("gpu", "xid", "clock_event", "field")))
            # the parser adds _total to counters named without it, as dcgm-exporter names them
            name = s.name if f"\n{s.name}{{" in text or f"\n{s.name} " in text else family.name
            out[(name, keep)] = s.value
    return out


def _get(samples: Samples, name: str, gpu: int, **extra: str) -> float | None:
    key = tuple(sorted({"gpu": str(gpu), **extra}.items()))
    return samples.get((name, key))


def test_memory_leak_fills_memory_then_the_process_is_gone() -> None:
    poller = _poller(Scripted(faults=["1=leak:10m@5m"]))
    near_oom = _sweep_all(poller, 880.0)
    assert _get(near_oom, "DCGM_FI_DEV_FB_FREE", 1) < 0.05 * _get(near_oom, "DCGM_FI_DEV_FB_TOTAL", 1)  # type: ignore[operator]
    after = _sweep_all(poller, 1000.0)
    assert _get(after, "DCGM_FI_DEV_GPU_UTIL", 1) == 0 and _get(after, "DCGM_FI_DEV_FB_USED", 1) == 0
    assert not [k for k in after if k[0] == "gpudash_process_fb_used_mib" and ("gpu", "1") in k[1]]
    assert _get(after, "DCGM_FI_DEV_GPU_UTIL", 0) > 50


def test_thermal_throttling_shows_as_reasons_and_a_clock_drop() -> None:
    hot = _sweep_all(_poller(Scripted(faults=["2=thermal@1m"])), 900.0)
    assert _get(hot, "gpudash_clock_event_active", 2, clock_event="sw_thermal_slowdown") == 1
    assert _get(hot, "gpudash_clock_event_active", 2, clock_event="hw_thermal_slowdown") == 1
    assert _get(hot, "gpudash_clock_event_active", 0, clock_event="sw_thermal_slowdown") == 0
    assert _get(hot, "DCGM_FI_DEV_SM_CLOCK", 2) < 0.75 * _get(hot, "DCGM_FI_DEV_MAX_SM_CLOCK", 2)  # type: ignore[operator]
    assert _get(hot, "DCGM_FI_DEV_GPU_TEMP", 2) >= _get(hot, "DCGM_FI_DEV_SLOWDOWN_TEMP", 2)  # type: ignore[operator]


def test_stalled_job_holds_memory_and_does_nothing() -> None:
    stalled = _sweep_all(_poller(Scripted(faults=["0=stall@5m"])), 900.0)
    assert _get(stalled, "DCGM_FI_DEV_GPU_UTIL", 0) == 0 and _get(stalled, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0) == 0
    assert _get(stalled, "DCGM_FI_DEV_FB_USED", 0) > 0.7 * _get(stalled, "DCGM_FI_DEV_FB_TOTAL", 0)  # type: ignore[operator]


def test_xid_is_a_counter_by_code_with_the_last_code_and_time() -> None:
    poller = _poller(Scripted(faults=["1=xid:48@2m+2m"]))
    before = _sweep_all(poller, 60.0)
    assert _get(before, "DCGM_FI_DEV_XID_ERRORS", 1) == 0
    assert not [k for k in before if k[0] == "gpudash_xid_errors_total"]
    during = _sweep_all(poller, 200.0)
    assert _get(during, "gpudash_xid_errors_total", 1, xid="48") == 2
    assert _get(during, "DCGM_FI_DEV_XID_ERRORS", 1) == 48
    assert _get(during, "gpudash_xid_last_timestamp_seconds", 1) == 180.0
    later = _sweep_all(poller, 1200.0)  # the gauge lets go after 5 minutes, the counter keeps counting
    assert _get(later, "DCGM_FI_DEV_XID_ERRORS", 1) == 0 and _get(later, "gpudash_xid_errors_total", 1, xid="48") == 2


def test_lost_gpu_goes_down_alone_and_comes_back_in_full(caplog: pytest.LogCaptureFixture) -> None:
    poller = _poller(Scripted(faults=["1=lost@1m+5m"]))
    caplog.set_level(logging.INFO, "gpudash.exporter")
    _sweep_all(poller, 30.0)
    for now in (90.0, 91.0, 92.0):
        poller.sweep("fast", now)
    down = _samples(poller)
    assert _get(down, "gpudash_gpu_up", 1) == 0 and _get(down, "gpudash_gpu_up", 0) == 1
    assert _get(down, "DCGM_FI_DEV_FB_USED", 1) is None and _get(down, "DCGM_FI_DEV_FB_USED", 2) is not None
    assert _get(down, "gpudash_xid_errors_total", 1, xid="79") == 1
    assert sum("GPU 1: lost" in r.message for r in caplog.records) == 1
    poller.sweep("fast", 400.0)  # back: this fast sweep also re-reads the static and slow fields
    back = _samples(poller)
    assert _get(back, "gpudash_gpu_up", 1) == 1
    assert _get(back, "DCGM_FI_DEV_MAX_SM_CLOCK", 1) == 1980 and _get(back, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1)
    assert sum("GPU 1: back" in r.message for r in caplog.records) == 1


def test_not_supported_is_left_out_for_that_gpu_logged_once_and_not_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = Scripted()
    source.unsupported[2] = {"hbm_temp"}
    poller = _poller(source)
    caplog.set_level(logging.INFO, "gpudash.exporter")
    _sweep_all(poller, 10.0)
    for now in (11.0, 12.0, 13.0):
        poller.sweep("fast", now)
    samples = _samples(poller)
    assert _get(samples, "DCGM_FI_DEV_MEMORY_TEMP", 2) is None and _get(samples, "DCGM_FI_DEV_MEMORY_TEMP", 0)
    assert sum("GPU 2: hbm_temp is not supported" in r.message for r in caplog.records) == 1
    asked = [keys for index, keys in source.requests if index == 2 and "gpu_util" in keys]
    assert "hbm_temp" in asked[0] and not any("hbm_temp" in keys for keys in asked[1:])
    assert not [k for k in samples if k[0] == "gpudash_exporter_collection_errors_total"]


def test_a_failing_field_is_counted_logged_once_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    source = Scripted()
    source.failing[0] = {"power"}
    poller = _poller(source)
    caplog.set_level(logging.INFO, "gpudash.exporter")
    _sweep_all(poller, 10.0)
    poller.sweep("fast", 11.0)
    failing = _samples(poller)
    assert _get(failing, "DCGM_FI_DEV_POWER_USAGE", 0) is None and _get(failing, "DCGM_FI_DEV_POWER_USAGE", 1)
    assert failing[("gpudash_exporter_collection_errors_total", (("field", "power"),))] == 2
    assert sum("reading power failed" in r.message for r in caplog.records) == 1
    source.failing.clear()
    poller.sweep("fast", 12.0)
    assert _get(_samples(poller), "DCGM_FI_DEV_POWER_USAGE", 0)
    source.failing[0] = {"power"}
    poller.sweep("fast", 13.0)
    assert sum("reading power failed" in r.message for r in caplog.records) == 2  # a new failure is news


def test_a_source_exception_downs_only_that_gpu() -> None:
    source = Scripted()
    poller = _poller(source)
    _sweep_all(poller, 10.0)
    good = _samples(poller)[("gpudash_exporter_last_sweep_timestamp_seconds", ())]
    source.broken.add(1)
    poller.sweep("fast", 11.0)
    samples = _samples(poller)
    assert _get(samples, "gpudash_gpu_up", 1) == 0 and _get(samples, "gpudash_gpu_up", 0) == 1
    assert samples[("gpudash_exporter_collection_errors_total", (("field", "read"),))] == 1
    assert samples[("gpudash_exporter_last_sweep_timestamp_seconds", ())] == good  # not a clean sweep


def test_each_cadence_reads_only_its_fields_and_slow_values_persist() -> None:
    source = Scripted(gpus=1)
    poller = _poller(source)
    _sweep_all(poller, 10.0)
    source.requests.clear()
    poller.sweep("fast", 11.0)
    (fast,) = {keys for _, keys in source.requests}
    assert not fast & COSTLY_KEYS and not fast & STATIC_KEYS and "gpu_util" in fast
    assert _get(_samples(poller), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0)  # kept from the slow sweep
    source.requests.clear()
    poller.sweep("slow", 12.0)
    (slow,) = {keys for _, keys in source.requests}
    # vgpu_license was learnt unsupported; per-link errors are published only with --nvlink-per-link (the links'
    # states are still read: the health status judges them)
    assert slow == COSTLY_KEYS - {"vgpu_license", "nvlink_link_errors"}


class Stuck(Scripted):
    """A driver call that does not return until the test lets it: the slowest source there is."""

    def __init__(self) -> None:
        super().__init__(gpus=2)
        self.stuck = False
        self.inside = threading.Event()
        self.release = threading.Event()

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        if self.stuck:
            self.inside.set()
            self.release.wait(60)
        return super().read(index, keys, now)


def test_a_scrape_never_waits_for_a_stuck_source() -> None:
    source = Stuck()
    poller = _poller(source)
    _sweep_all(poller, 10.0)
    last = poller.exposition
    source.stuck = True
    sweeping = threading.Thread(target=poller.sweep, args=("fast", 11.0), daemon=True)
    sweeping.start()
    try:
        assert source.inside.wait(10), "the sweep never reached the source"
        # what a scrape serves while the sweep is stuck in the driver: the last snapshot, complete and gzipped;
        # `within` fails with DeadlineExceeded if serving waits for the source, which would never return
        served = within(5.0, lambda: (poller.exposition.body, poller.exposition.gzipped()))
        assert served == (last.body, last.gzipped())
        assert _get(_samples(poller), "gpudash_gpu_up", 1) == 1
    finally:
        source.release.set()
        sweeping.join(10)
    assert not sweeping.is_alive()
    assert poller.exposition is not last  # the sweep, once released, published a new snapshot


class FirstReadEmpty(Scripted):
    """Rate fields (PCIe throughput, GPM ratios) give nothing on their first read, as NVML does."""

    RATES = frozenset({"pcie_rx", "pcie_tx"})

    def __init__(self) -> None:
        super().__init__(gpus=2)
        self.rate_reads: dict[int, int] = {}

    def read(self, index: int, keys: frozenset[str], now: float) -> GpuReading:
        reading = super().read(index, keys, now)
        if keys & self.RATES:
            self.rate_reads[index] = self.rate_reads.get(index, 0) + 1
            if self.rate_reads[index] == 1:
                reading = replace(reading, values={k: v for k, v in reading.values.items() if k not in self.RATES})
        return reading


def test_fields_pending_counts_fields_still_without_a_value_until_the_second_slow_read() -> None:
    source = FirstReadEmpty()
    source.unsupported[1] = {"energy"}  # never counted: NVML said it cannot be read on this GPU
    poller = _poller(source)
    assert set(FirstReadEmpty.RATES) <= poller.slow_keys
    first = _sweep_all(poller, 0.0)
    assert first[("gpudash_exporter_fields_pending", ())] == 4  # two rate fields on each of two GPUs
    poller.sweep("slow", 10.0)
    assert _samples(poller)[("gpudash_exporter_fields_pending", ())] == 0
    source.failing[0] = {"power"}  # a failing field is reported through the error counter instead
    poller.sweep("fast", 11.0)
    assert _samples(poller)[("gpudash_exporter_fields_pending", ())] == 0
