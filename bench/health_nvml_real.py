"""GPU-health fields through gpudash's NVML source, side by side with nvidia-smi, and what they cost per sweep.

    python bench/health_nvml_real.py                 # a GPU node: NVML + nvidia-smi in the same run
    python bench/health_nvml_real.py --simulate 2    # no GPU: the simulated source, same report, no nvidia-smi

(a) every health field of every GPU as the exporter reads it (values, NotSupported fields, NVLink links);
(b) nvidia-smi's view of the same GPU in the same run (ECC mode and counts, remapped rows, temperature limits
    and T.Limit, recovery action, NVLink state and error counters);
(c) the cost: each health reader alone, and the poller's fast and slow sweeps with and without the health
    fields, against the NVML floor in shared/reference/h200-nvml-costs.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
try:  # installed from a wheel (a GPU node without the repository's checkout)
    import gpudash  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT))

from gpudash.catalog import BY_KEY  # noqa: E402
from gpudash.exporter.collectors import all_signals  # noqa: E402
from gpudash.exporter.health_reads import ECC_KEYS, NVLINK_KEYS, RETIRED_KEYS  # noqa: E402
from gpudash.exporter.poller import Poller, keys_to_read  # noqa: E402
from gpudash.exporter.source import Source  # noqa: E402

HEALTH_KEYS = ECC_KEYS | RETIRED_KEYS | NVLINK_KEYS | frozenset({
    "remapped_rows_cor", "remapped_rows_unc", "row_remap_pending", "row_remap_failure",
    "gpu_max_op_temp", "mem_max_op_temp", "slowdown_temp", "shutdown_temp", "temp_margin",
    "thermal_violation", "power_violation", "recovery_action",
})
PUBLISHED_HEALTH = HEALTH_KEYS | {"xid_count_window", "clock_events_count", "gpus_expected", "xid_count_total",
                                  "clock_events_total", "gpu_health_status", "p2p_status"}
# shared/reference/h200-nvml-costs.md (one H200, driver 580.159.04): the floor each read is judged against
FLOOR_US = {
    "core fields of one GPU (util, memory, temps, power, clocks)": 30.0,
    "ECC counter (nvmlDeviceGetTotalEccErrors), one call": 1.5,
    "remapped rows (nvmlDeviceGetRemappedRows)": 1.5,
    "temperature threshold, fast kind (slowdown)": 1.1,
    "whole sweep of 9 common fields incl. energy": 4200.0,
}
SMI_QUERY = (
    "ecc.mode.current", "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
    "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure",
    "temperature.gpu", "temperature.gpu.tlimit", "gpu_recovery_action",
)
# exporter key -> the nvidia-smi query field it should equal
SAME = {
    "ecc_sbe_vol": "ecc.errors.corrected.volatile.total",
    "ecc_dbe_vol": "ecc.errors.uncorrected.volatile.total",
    "ecc_sbe_agg": "ecc.errors.corrected.aggregate.total",
    "ecc_dbe_agg": "ecc.errors.uncorrected.aggregate.total",
    "retired_sbe": "retired_pages.single_bit_ecc.count",
    "retired_dbe": "retired_pages.double_bit.count",
    "remapped_rows_cor": "remapped_rows.correctable",
    "remapped_rows_unc": "remapped_rows.uncorrectable",
    "row_remap_pending": "remapped_rows.pending",
    "row_remap_failure": "remapped_rows.failure",
    "temp_margin": "temperature.gpu.tlimit",
    "recovery_action": "gpu_recovery_action",
}
# nvidia-smi's words for the numbers NVML gives (recovery action: nvmlDeviceGpuRecoveryAction_t, §1a)
SMI_WORDS = {"no": 0.0, "yes": 1.0, "none": 0.0, "gpu reset required": 1.0, "node reboot required": 2.0,
             "drain p2p": 3.0, "drain and reset": 4.0}


def smi_number(text: str) -> float | None:
    """nvidia-smi's value as a number; None for [N/A] and for fields this nvidia-smi does not know."""
    word = text.strip().lower()
    if word in SMI_WORDS:
        return SMI_WORDS[word]
    try:
        return float(word)
    except ValueError:
        return None
SMI_Q_LINES = re.compile(r"(Max Operating|Slowdown|Shutdown|T\.Limit|Target|Current Temp|Recovery Action|"
                         r"Pending|Remapping Failure|Correctable Error|Uncorrectable Error|ECC Mode|Current\s*:|"
                         r"DRAM (Un)?[Cc]orrectable|SRAM (Un)?[Cc]orrectable)", re.IGNORECASE)


def open_source(simulate: int | None) -> Source:
    if simulate:
        from gpudash.exporter.sim.fleet import fleet_from_specs
        from gpudash.exporter.sim.simulated import SimulatedSource

        return SimulatedSource(fleet_from_specs(simulate, seed=1, epoch=time.time() - 3600))
    from gpudash.exporter.nvml import NvmlSource

    return NvmlSource()


def run(*command: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({' '.join(command)}: {exc})"
    return done.stdout + (f"(exit {done.returncode}: {done.stderr.strip()})" if done.returncode else "")


# -- (a) ----------------------------------------------------------------------------------------------

def report_fields(source: Source) -> dict[int, dict[str, float]]:
    print("== (a) health fields through gpudash's NVML source ==")
    out: dict[int, dict[str, float]] = {}
    now = time.time()
    for gpu in source.gpus():
        reading = source.read(gpu.index, HEALTH_KEYS, now)
        print(f"GPU {gpu.index} {gpu.model_name} {gpu.uuid} {gpu.pci_bus_id} up={reading.up}")
        for key in sorted(HEALTH_KEYS):
            if key in reading.values:
                print(f"  {key:20} {reading.values[key]:g}")
        print(f"  NotSupported here: {', '.join(sorted(reading.unsupported)) or 'none'}")
        if reading.errors:
            print(f"  failed reads: {dict(reading.errors)}")
        links = reading.links or ()
        active = sum(link.up for link in links)
        print(f"  NVLink: {len(links)} links, {active} active"
              + "".join(f"\n    link {lk.link}: {'up' if lk.up else 'down'} {dict(lk.errors)}" for lk in links))
        out[gpu.index] = dict(reading.values)
    return out


# -- (b) ----------------------------------------------------------------------------------------------

def report_smi(source: Source, ours: dict[int, dict[str, float]]) -> None:
    print("\n== (b) nvidia-smi in the same run ==")
    for gpu in source.gpus():
        smi: dict[str, str] = {}
        for field in SMI_QUERY:  # one field at a time: an unknown field fails the whole query
            text = run("nvidia-smi", f"--id={gpu.index}", f"--query-gpu={field}", "--format=csv,noheader,nounits")
            smi[field] = text.strip() if not text.startswith("(") else "n/a (unknown to this nvidia-smi)"
        print(f"GPU {gpu.index}: exporter vs nvidia-smi --query-gpu")
        for field, value in smi.items():
            key = next((k for k, f in SAME.items() if f == field), None)
            mine = ours[gpu.index].get(key) if key else None
            verdict = ""
            if key is not None:
                theirs = smi_number(value)
                verdict = ("same (N/A on both)" if theirs is None and mine is None
                           else "same" if theirs == mine else "DIFF")
            shown = f"{mine:g}" if mine is not None else "-"
            print(f"  {field:42} smi {value:24} exporter {key or '':18} {shown:10} {verdict}")
        v = ours[gpu.index]
        if "gpu_max_op_temp" in v and "temp_margin" in v:
            print(f"  exporter: GPU max op {v['gpu_max_op_temp']:g} C, memory max op {v.get('mem_max_op_temp', 0):g} C,"
                  f" slowdown {v.get('slowdown_temp', 0):g} C, shutdown {v.get('shutdown_temp', 0):g} C, margin "
                  f"{v['temp_margin']:g} C")
        q = run("nvidia-smi", "-q", f"--id={gpu.index}", "-d", "ECC,ROW_REMAPPER,TEMPERATURE,PAGE_RETIREMENT")
        print("  nvidia-smi -q -d ECC,ROW_REMAPPER,TEMPERATURE,PAGE_RETIREMENT (the lines compared):")
        for line in q.splitlines():
            if SMI_Q_LINES.search(line):
                print(f"    {line.strip()}")
        full = run("nvidia-smi", "-q", f"--id={gpu.index}")
        for line in full.splitlines():
            if "Recovery Action" in line:
                print(f"    (-q) {line.strip()}")
    print("\n-- nvidia-smi nvlink -s --")
    print(run("nvidia-smi", "nvlink", "-s").rstrip() or "(no output)")
    print("-- nvidia-smi nvlink -e --")
    print(run("nvidia-smi", "nvlink", "-e").rstrip() or "(no output)")


# -- (c) ----------------------------------------------------------------------------------------------

def _mean_us(call: Callable[[], object], repeat: int) -> float:
    call()  # warm
    started = time.perf_counter()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - started) / repeat * 1e6


def report_costs(source: Source, repeat: int) -> None:
    print("\n== (c) cost ==")
    now = time.time()
    groups: dict[str, frozenset[str]] = {
        "ECC (4 counters)": ECC_KEYS, "retired pages": RETIRED_KEYS, "NVLink (state + errors per link)": NVLINK_KEYS,
        "row remapping (incl. pending)": frozenset({"row_remap_pending"}),
        "GPU max op temp": frozenset({"gpu_max_op_temp"}), "memory max op temp": frozenset({"mem_max_op_temp"}),
        "margin temperature": frozenset({"temp_margin"}), "thermal violation": frozenset({"thermal_violation"}),
        "power violation": frozenset({"power_violation"}),
        "recovery action (field 230)": frozenset({"recovery_action"}),
    }
    print("each health read alone, GPU 0 (a NotSupported read is asked once, then skipped):")
    for name, keys in groups.items():
        first, unsupported = _first_read(source, keys, now)
        if unsupported:
            print(f"  {name:36} NotSupported (first try {first:.1f} us, never asked again)")
        else:
            print(f"  {name:36} {_mean_us(lambda k=keys: source.read(0, k, now), 50):9.1f} us")
    for label, floor in FLOOR_US.items():
        print(f"  floor (h200-nvml-costs.md): {label}: {floor:g} us")
    report_reader_costs(source)
    gpus = len(source.gpus())
    everything = all_signals().keys
    without = tuple(k for k in everything if k not in PUBLISHED_HEALTH)
    for name, published in (("without the health fields", without), ("with the health fields", everything)):
        poller = Poller(source, published, slow_keys=source.costly_keys(), hostname="bench")
        poller.sweep("static")
        poller.sweep("slow")
        fast = _sweeps(poller, "fast", repeat)
        slow = _sweeps(poller, "slow", max(3, repeat // 10))
        print(f"  poller {name:26}: fast sweep {fast / gpus:8.1f} us/GPU, slow sweep {slow / gpus:8.1f} us/GPU "
              f"({gpus} GPUs; fast reads {len(poller.fast_keys)} keys, slow {len(poller.slow_keys)})")
    pending = re.search(r"^gpudash_exporter_fields_pending (\d+)", poller.exposition.body.decode(), re.MULTILINE)
    print(f"  fields read but still without a value after one slow and {repeat} fast sweeps: "
          f"{pending.group(1) if pending else '?'} (0: every supported field reported)")
    print("\n== /metrics lines of the new series (GPU 0, first links) ==")
    shown = 0
    for line in poller.exposition.body.decode().splitlines():
        new = any(line.startswith(s) for s in _NEW_SERIES) and ('gpu="0"' in line or "gpus_expected" in line)
        if new and ('link="' not in line or re.search(r'link="[01]"', line)) and shown < 60:
            print(re.sub(r'UUID="[^"]*",pci_bus_id="[^"]*",device="[^"]*",modelName="[^"]*",', "", line))
            shown += 1


_NEW_SERIES = tuple(BY_KEY[k].dcgm_name for k in sorted(PUBLISHED_HEALTH | {"gpu_up"})
                    if k not in ("slowdown_temp", "shutdown_temp", "remapped_rows_cor", "remapped_rows_unc",
                                 "row_remap_failure"))


def report_reader_costs(source: Source) -> None:
    """Every NVML reader of GPU 0 alone (core fields too), and the NVLink calls one by one."""
    readers = getattr(source, "_readers", None)
    nv = getattr(source, "nv", None)
    if readers is None or nv is None:
        return
    handle = source._handles[0]  # type: ignore[attr-defined]
    print("every NVML reader of GPU 0 alone (mean of 20; the slow loop's are marked costly):")
    costly = source.costly_keys()
    for reader in readers[0]:
        try:
            cost = f"{_mean_us(lambda r=reader: r.read(handle, 0), 20):9.1f} us"
        except Exception as exc:  # NotSupported and friends: what the source would mark unsupported
            cost = f"   failed: {type(exc).__name__} {exc}"
        loop = "slow" if reader.keys & costly else "fast"
        print(f"  {loop} {cost}  {', '.join(sorted(reader.keys))[:90]}")
    print("the NVLink calls, one at a time (link 0):")
    calls = {
        "nvmlDeviceGetNvLinkState": lambda: nv.nvmlDeviceGetNvLinkState(handle, 0),
        "nvmlDeviceGetNvLinkErrorCounter (one counter)": lambda: nv.nvmlDeviceGetNvLinkErrorCounter(handle, 0, 0),
        "nvmlDeviceGetFieldValues (3 DL fields x 18 links)":
            lambda: nv.nvmlDeviceGetFieldValues(handle, [(f, k) for k in range(18) for f in (161, 162, 163)]),
        "nvmlDeviceGetFieldValues (3 DL fields, link 0)":
            lambda: nv.nvmlDeviceGetFieldValues(handle, [(f, 0) for f in (161, 162, 163)]),
    }
    for name, call in calls.items():
        try:
            print(f"  {name:52} {_mean_us(call, 20):9.1f} us")
        except Exception as exc:
            print(f"  {name:52} failed: {exc}")


def _first_read(source: Source, keys: frozenset[str], now: float) -> tuple[float, bool]:
    """µs of the first read of ``keys`` on GPU 0, and whether the GPU said NotSupported to all of them."""
    started = time.perf_counter()
    reading = source.read(0, keys, now)
    return (time.perf_counter() - started) * 1e6, keys <= reading.unsupported


def _sweeps(poller: Poller, loop: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        poller.sweep(loop)
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulate", type=int, metavar="N", help="the simulated source instead of NVML")
    parser.add_argument("--repeat", type=int, default=50, help="fast sweeps timed (slow: a tenth)")
    args = parser.parse_args(argv)
    source = open_source(args.simulate)
    try:
        ours = report_fields(source)
        if not args.simulate:
            report_smi(source, ours)
        report_costs(source, args.repeat)
        if not args.simulate:
            from gpudash.exporter.expected import pci_gpu_count

            print(f"\nPCI bus: {pci_gpu_count()} NVIDIA GPU functions (vendor 0x10de, class 0x0300xx/0x0302xx); "
                  f"NVML sees {len(source.gpus())}")
        print(f"\nread keys of the full exporter: {len(keys_to_read(all_signals().keys))}")
    finally:
        source.close()


if __name__ == "__main__":
    main()
