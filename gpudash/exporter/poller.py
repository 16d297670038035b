"""The background poller: reads the source off the scrape path and keeps one pre-rendered exposition.

Three cadences, so a slow call never delays a fast one:

- static facts (max SM clock, slowdown, shutdown and max operating temperatures) are read at start, and
  again after a GPU comes back;
- the fast loop reads everything cheap every ``interval`` (default 1 s);
- the slow loop reads what the source calls costly (the energy counter takes ~4 ms, GPM profiling
  metrics ~0.8 ms of CPU, PCIe throughput without GPM blocks ~20 ms per direction) every
  ``slow_interval``, in its own thread.

dcgm-exporter's windowed counts need history: XID events come with each reading (the source keeps them), and
the poller notes when each clock event reason turns on. After each sweep the snapshot is rendered once; a
scrape only writes those bytes. Faults stay local: a NotSupported field is left out for that GPU and logged
once; a lost GPU reads ``gpudash_gpu_up 0``, its labels unchanged, while the others keep reporting, and is
read in full again when it comes back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from gpudash.exporter.attribution import Attributor, Labels, instance_copies, job_info
from gpudash.exporter.exposition import Exposition, GpuView, Snapshot, render
from gpudash.exporter.health_status import INPUT_KEYS as HEALTH_STATUS_KEYS
from gpudash.exporter.nic_affinity import GpuNic
from gpudash.exporter.source import (
    COUNT_WINDOW_SECONDS,
    LIST_KEYS,
    MAX_RECENT_EVENTS,
    MIG_INSTANCES,
    MIG_KEYS,
    GpuReading,
    LinkHealth,
    MigInstance,
    PeerStatus,
    ProcessUsage,
    Source,
    XidState,
)

log = logging.getLogger("gpudash.exporter")

STATIC_KEYS = frozenset({"sm_clock_max", "slowdown_temp", "shutdown_temp", "gpu_max_op_temp", "mem_max_op_temp"})
# Published signals that need a different read, or none (they come with every reading).
_READ_FOR: dict[str, frozenset[str]] = {
    "clock_event_active": frozenset({"clock_event_reasons"}),
    "clock_events_count": frozenset({"clock_event_reasons"}),
    "clock_events_total": frozenset({"clock_event_reasons"}),
    "xid_count_window": frozenset(),
    "xid_count_total": frozenset(),
    "gpu_health_status": HEALTH_STATUS_KEYS | {"nvlink_link_up"},  # judged from these reads and the links
    "gpus_expected": frozenset(),
    "xid_total": frozenset(),
    "xid_last": frozenset(),
    "xid_last_time": frozenset(),
    "gpu_up": frozenset(),
}


def rising_bits(before: int, after: int) -> list[int]:
    """The bits set in ``after`` that were clear in ``before``: a clock event reason that just turned on."""
    started = after & ~before
    return [1 << b for b in range(started.bit_length()) if started >> b & 1]


def keys_to_read(published: Iterable[str]) -> frozenset[str]:
    keys: set[str] = set()
    for key in published:
        keys |= _READ_FOR.get(key, frozenset({key}))
        if key in MIG_KEYS:  # a MIG GPU gives it per instance too
            keys.add(MIG_INSTANCES)
    return frozenset(keys)


@dataclass
class _GpuState:
    up: bool = True
    values: dict[str, float] = field(default_factory=dict)
    xid: XidState = field(default_factory=XidState)
    processes: tuple[ProcessUsage, ...] = ()
    links: tuple[LinkHealth, ...] = ()
    # each clock event reason's activations (time, bit): a bit set that was clear at the previous read
    clock_events: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=MAX_RECENT_EVENTS))
    clock_event_totals: dict[int, int] = field(default_factory=dict)  # every activation since start, by bit
    peers: tuple[PeerStatus, ...] = ()
    instances: tuple[MigInstance, ...] = ()  # MIG GPU instances, as of the last slow read
    unsupported: set[str] = field(default_factory=set)
    failing: set[str] = field(default_factory=set)  # fields whose failure was logged, until they recover
    needs_full: bool = False  # came back from being lost: read static and slow fields on the next sweep


class Poller:
    def __init__(
        self,
        source: Source,
        published: Iterable[str],
        *,
        slow_keys: Iterable[str] = (),
        hostname: str | None = None,
        hostname_label: str = "hostname",
        driver_version_label: bool = True,
        interval: float = 1.0,
        slow_interval: float = 10.0,
        clock: Callable[[], float] = time.time,
        attributor: Attributor | None = None,
        count_window: float = COUNT_WINDOW_SECONDS,
        gpus_expected: int | None = None,
        nics: Sequence[GpuNic] = (),
        node_series: Callable[[float], str] | None = None,
    ) -> None:
        self.source = source
        self.published = tuple(published)
        wanted = keys_to_read(self.published)
        self.static_keys = wanted & STATIC_KEYS
        self.slow_keys = (wanted & frozenset(slow_keys)) - self.static_keys
        self.fast_keys = wanted - self.static_keys - self.slow_keys
        self._value_keys = wanted - LIST_KEYS  # read keys that give a value (processes and links give a list)
        # each published key's reads, for the keys a GPU cannot give (a key read by none is always given)
        self._reads = {key: reads for key in self.published if (reads := keys_to_read((key,)))}
        self.count_window = count_window
        self.gpus_expected = len(source.gpus()) if gpus_expected is None else gpus_expected  # the count at start
        self.nics = tuple(nics)
        self.node_series = node_series  # the node's own series at a time (a simulated node's InfiniBand ports)
        self._now: float | None = None
        self.interval = interval
        self.slow_interval = slow_interval
        self.clock = clock
        self.attributor = attributor
        self._attribution_failing: set[str] = set()  # the steps (refresh, labels) whose failure was logged
        self.gpus = list(source.gpus())
        self._labels = (hostname, hostname_label, source.driver_version() if driver_version_label else None)
        self._state = {g.index: _GpuState() for g in self.gpus}
        self._lock = threading.Lock()
        self._durations: dict[str, float] = {}
        self._errors: dict[str, int] = {}
        self._last_sweep: float | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._exposition = Exposition(self._render())

    @property
    def exposition(self) -> Exposition:
        return self._exposition

    # -- one sweep, callable directly (tests drive the poller with their own clock) -----------------

    def sweep(self, loop: str = "fast", now: float | None = None) -> None:
        """Read every GPU's ``loop`` fields (fast | slow | static) once, then re-render."""
        keys = {"fast": self.fast_keys, "slow": self.slow_keys, "static": self.static_keys}[loop]
        started = time.perf_counter()
        now = self.clock() if now is None else now
        clean = True
        for gpu in self.gpus:
            state = self._state[gpu.index]
            wanted = keys | (self.slow_keys | self.static_keys if state.needs_full and loop == "fast" else set())
            wanted = frozenset(wanted - state.unsupported)
            try:
                reading = self.source.read(gpu.index, wanted, now)
            except Exception as exc:  # a bug or a broken driver: keep the other GPUs going
                clean = False
                self._count_error("read")
                log.error("GPU %d: reading failed: %s", gpu.index, exc, exc_info=log.isEnabledFor(logging.DEBUG))
                reading = GpuReading(gpu.index, up=False, xid=state.xid)
            self._merge(state, gpu.index, wanted, reading, now)
        if loop == "fast":
            self._refresh_attribution(now)
        with self._lock:
            self._now = now if self._now is None else max(self._now, now)
            self._durations[loop] = time.perf_counter() - started
            if clean and loop == "fast":
                self._last_sweep = now
        self._exposition = Exposition(self._render())

    def _merge(self, state: _GpuState, index: int, wanted: frozenset[str], reading: GpuReading, now: float) -> None:
        with self._lock:
            state.xid = reading.xid
            if not reading.up:
                if state.up:
                    log.warning("GPU %d: lost (fell off the bus or NVML cannot reach it); gpu_up is 0", index)
                state.up, state.needs_full, state.processes, state.links, state.peers = False, True, (), (), ()
                state.instances = ()
                state.values.clear()
                return
            mask = reading.values.get("clock_event_reasons")
            if mask is not None:
                before = int(state.values.get("clock_event_reasons", 0))
                for bit in rising_bits(before, int(mask)):
                    state.clock_events.append((now, bit))
                    state.clock_event_totals[bit] = state.clock_event_totals.get(bit, 0) + 1
                while state.clock_events and state.clock_events[0][0] <= now - self.count_window:
                    state.clock_events.popleft()
            if not state.up:
                log.warning("GPU %d: back", index)
            state.up = True
            state.needs_full = state.needs_full and not (self.slow_keys | self.static_keys) <= wanted
            for key in wanted:
                if key in reading.values:
                    state.values[key] = reading.values[key]
                    state.failing.discard(key)
                else:
                    state.values.pop(key, None)
            for key in reading.unsupported - state.unsupported:
                log.info("GPU %d: %s is not supported; its series is left out", index, key)
                state.unsupported.add(key)
            for key, error in reading.errors.items():
                self._errors[key] = self._errors.get(key, 0) + 1
                if key not in state.failing:
                    state.failing.add(key)
                    log.warning("GPU %d: reading %s failed: %s (logged once until it recovers)", index, key, error)
            if reading.processes is not None:
                state.processes = reading.processes
            if reading.links is not None:
                state.links = reading.links
            if reading.peers is not None:
                state.peers = reading.peers
            if reading.instances is not None:
                state.instances = reading.instances

    def _refresh_attribution(self, now: float) -> None:
        if self.attributor is None:
            return
        try:
            self.attributor.refresh(self.gpus, now)
        except Exception as exc:  # attribution is an extra: its failure never costs a sweep
            self._attribution_failed("refresh", exc)
        else:
            self._attribution_failing.discard("refresh")

    def _attribution_failed(self, step: str, exc: Exception) -> None:
        self._count_error("attribution")
        if step not in self._attribution_failing:
            self._attribution_failing.add(step)
            log.warning("job attribution (%s) failed, series go out without its labels: %s (logged once until it "
                        "recovers)", step, exc)

    def _attribution(self, views: list[GpuView]) -> list[GpuView]:
        """The views with each GPU's copies and its processes' labels, or unchanged when that fails."""
        attributor = self.attributor
        if attributor is None:
            return views
        try:
            out = []
            for view in views:
                procs: dict[int, Labels] = {p.pid: attributor.process_labels(p.pid) for p in view.processes}
                out.append(replace(view, copies=attributor.gpu_copies(view.identity),
                                   process_labels={pid: labels for pid, labels in procs.items() if labels},
                                   instance_copies={i.gpu_instance: instance_copies(attributor, view.identity,
                                                                                    i.gpu_instance)
                                                    for i in view.instances}))
        except Exception as exc:
            self._attribution_failed("labels", exc)
            return views
        self._attribution_failing.discard("labels")
        return out

    def _count_error(self, key: str) -> None:
        with self._lock:
            self._errors[key] = self._errors.get(key, 0) + 1

    def _render(self) -> bytes:
        hostname, hostname_label, driver = self._labels
        with self._lock:
            views = [
                GpuView(g, s.up, dict(s.values), s.xid, s.processes, links=s.links,
                        clock_events=tuple(s.clock_events), clock_event_totals=dict(s.clock_event_totals),
                        peers=s.peers, unsupported=self._unsupported(s), instances=s.instances)
                for g in self.gpus
                for s in (self._state[g.index],)
            ]
        views = self._attribution(views)
        try:
            jobs = job_info(self.attributor)
        except Exception as exc:  # an extra, as the labels are
            self._attribution_failed("job info", exc)
            jobs = ()
        with self._lock:
            snap = Snapshot(
                views,
                self.published,
                hostname,
                hostname_label,
                driver,
                dict(self._durations),
                dict(self._errors),
                self._last_sweep,
                self._pending(),
                now=self._now,
                count_window=self.count_window,
                gpus_expected=self.gpus_expected,
                nics=self.nics,
                node_text=self.node_series(self._now if self._now is not None else self.clock())
                if self.node_series is not None else "",
                job_info=jobs,
            )
        return render(snap)

    def _unsupported(self, state: _GpuState) -> frozenset[str]:
        """The published keys whose every read this GPU answered NotSupported."""
        return frozenset(key for key, reads in self._reads.items() if reads <= state.unsupported)

    def _pending(self) -> int:
        """Fields this poller reads that have no value yet on a GPU that is up (not unsupported, not failing)."""
        return sum(len(self._value_keys - s.unsupported - s.failing - s.values.keys())
                   for s in self._state.values() if s.up)

    # -- the loops ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Read everything once (so the first scrape has data), then start the fast and slow loops."""
        self.sweep("static")
        self.sweep("slow")
        self.sweep("fast")
        self._threads = [threading.Thread(target=self._loop, args=("fast", self.interval), daemon=True)]
        if self.slow_keys:
            self._threads.append(threading.Thread(target=self._loop, args=("slow", self.slow_interval), daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)

    def _loop(self, loop: str, interval: float) -> None:
        next_at = time.monotonic() + interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            try:
                self.sweep(loop)
            except Exception:  # never let the loop die: the scrape would serve stale data forever
                log.exception("%s sweep failed", loop)
                self._count_error("sweep")
            next_at += interval
            now = time.monotonic()
            if next_at < now:  # overran: skip the ticks we missed rather than sweep back to back
                next_at = now + interval - (now - next_at) % interval
