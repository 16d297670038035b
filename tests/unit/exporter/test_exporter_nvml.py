"""The NVML source against the real library: a clear error where there is no GPU, real readings where there is.

Nothing here mocks pynvml. On a machine without the NVIDIA driver only the first group runs; on a GPU
node (the H200 run) only the second.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.cli import gpudash
from support.waiting import eventually

from gpudash.catalog import BY_KEY, Publisher
from gpudash.errors import ExporterError
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.poller import Poller, keys_to_read
from gpudash.exporter.source import GpuReading


def _nvml_available() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    pynvml.nvmlShutdown()
    return True


HAVE_NVML = _nvml_available()
needs_gpu = pytest.mark.skipif(not HAVE_NVML, reason="needs an NVIDIA driver and GPU")
without_gpu = pytest.mark.skipif(HAVE_NVML, reason="this machine has NVML")


@without_gpu
def test_missing_nvml_is_one_clear_error() -> None:
    from gpudash.exporter.nvml import NvmlSource

    with pytest.raises(ExporterError, match=r"cannot start NVML: .*--simulate N"):
        NvmlSource()


@without_gpu
def test_cli_without_nvml_exits_2_with_one_line(root: Path) -> None:
    done = gpudash("exporter", "--listen", "127.0.0.1:0", cwd=root)
    assert done.code == 2
    assert done.err.startswith("gpudash: cannot start NVML") and done.err.count("\n") == 1, done.err


@needs_gpu
def test_real_gpus_read_in_dcgm_units() -> None:
    from gpudash.exporter.nvml import NvmlSource

    source = NvmlSource()
    try:
        gpus = source.gpus()
        assert gpus and all(g.uuid.startswith("GPU-") and len(g.pci_bus_id) == 16 for g in gpus)
        wanted = keys_to_read(all_signals().keys)
        first = source.read(0, wanted, time.time())
        defaults = {s.key for s in BY_KEY.values() if s.publisher is Publisher.DCGM_DEFAULT}

        def complete() -> GpuReading | None:
            # GPM ratios need a window since the previous read: the first reads may have none or a short one
            reading = source.read(0, wanted, time.time())
            missing = defaults - set(reading.values) - reading.unsupported - first.unsupported
            ratio = reading.values.get("gr_engine_active", 0.0)
            return reading if reading.up and not reading.errors and missing <= {"xid_last"} and 0 <= ratio <= 1 \
                else None

        reading = eventually(complete, timeout=10, what="a reading of every default field")
        v = reading.values
        assert 0 <= v["gpu_util"] <= 100
        assert v["fb_used"] + v["fb_free"] + v.get("fb_reserved", 0) == pytest.approx(v["fb_total"], abs=2)
        assert 10 <= v["gpu_temp"] <= 100 and 10 < v["power"] < v["power_limit"] * 1.2
        assert 100 <= v["sm_clock"] <= v["sm_clock_max"] and v["slowdown_temp"] < v["shutdown_temp"]
        assert v["energy"] > 0
        # every default field read, but the XID gauge, which comes from events, not values
        assert defaults - set(v) - reading.unsupported - first.unsupported <= {"xid_last"}
        if "gr_engine_active" in v:
            assert 0 <= v["gr_engine_active"] <= 1 and v["pcie_tx"] >= 0
    finally:
        source.close()


@needs_gpu
def test_real_poller_renders_every_gpu() -> None:
    from gpudash.exporter.nvml import NvmlSource

    source = NvmlSource()
    try:
        poller = Poller(source, all_signals().keys, slow_keys=source.costly_keys(), hostname="h200")
        for loop in ("static", "slow", "fast", "fast"):
            poller.sweep(loop)
        text = poller.exposition.body.decode()
        for gpu in source.gpus():
            assert f'gpudash_gpu_up{{gpu="{gpu.index}",UUID="{gpu.uuid}"' in text
            assert f'DCGM_FI_DEV_FB_USED{{gpu="{gpu.index}"' in text
    finally:
        source.close()
