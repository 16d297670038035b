"""At most 30 labels a stored series (Mimir's limit), over the whole exposition with every attribution on: HPC
jobs, the kubelet's pod, namespace, container and pod UID, a pod with more allowed labels than fit, per-link NVLink.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.exposition import parse_exposition
from support.podresources_pb import Pod, list_response

from gpudash.catalog import DRA_LABELS
from gpudash.exporter.attribution import combined
from gpudash.exporter.attribution.dra import DRA_GPU_DRIVER as DRIVER
from gpudash.exporter.attribution.dra import DraDevice
from gpudash.exporter.attribution.hpc import HpcJobMapping
from gpudash.exporter.attribution.kubelet import KubeletAttributor, KubeletConfig
from gpudash.exporter.attribution.pods import PodInfo
from gpudash.exporter.collectors import all_signals
from gpudash.exporter.label_budget import MAX_LABELS_PER_SERIES, SCRAPE_LABELS, pod_label_room
from gpudash.exporter.poller import Poller
from gpudash.exporter.sim.fleet import fleet_from_specs
from gpudash.exporter.sim.simulated import SimulatedSource

SOURCE = SimulatedSource(fleet_from_specs(2, 3, faults=["0=xid:48@0"], epoch=0.0))
UID = "0d6e2f7a-1b2c-4d3e-8f9a-0b1c2d3e4f5a"
# A pod whose labels all pass an empty allow-list: far more than fit.
LABELS = {f"example.com/label-{n:02d}": f"v{n}" for n in range(60)}


def _exposition(tmp_path: Path, room: int | None, *, dra: bool = False) -> str:
    (tmp_path / "0").write_text("4811\n4812\n")  # two jobs share GPU 0: two copies of its series
    uuid = SOURCE.gpus()[0].uuid
    held: list[Pod] = [("ml", "trainer-0", {} if dra else {"main": [("nvidia.com/gpu", [uuid])]})]
    claims = {("ml", "trainer-0", "main"): [("a-claim-with-a-long-name", "ml", [(DRIVER, "node", "gpu-0")])]}
    kubelet = KubeletAttributor(
        KubeletConfig(pod_labels=True, pod_uid=True, max_pod_labels=room, dra=dra),
        lister=lambda _timeout: list_response(held, claims if dra else None),
        slice_lister=lambda _timeout: {("node", "gpu-0"): DraDevice(uuid, "7g.141gb", "MIG-" + uuid[4:])},
        pod_lister=lambda _timeout: [PodInfo(UID, "trainer-0", "ml", "Running", LABELS)], background=False)
    kubelet.poll(600.0)
    attributor = combined([HpcJobMapping(tmp_path), kubelet])
    poller = Poller(SOURCE, all_signals(nvlink_per_link=True).keys, slow_keys=SOURCE.costly_keys(),
                    hostname="a-node-with-a-long-name", attributor=attributor)
    for loop in ("static", "slow", "fast"):
        poller.sweep(loop, now=600.0)
    return poller.exposition.body.decode()


def _widest(text: str) -> tuple[int, dict[str, str]]:
    rows = [labels for samples in parse_exposition(text).values() for labels, _ in samples]
    widest = max(rows, key=len)
    return len(widest) + len(SCRAPE_LABELS), widest


def test_no_stored_series_has_more_than_30_labels_with_every_attribution_on(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    room = pod_label_room(("pod_uid",))
    with caplog.at_level(logging.WARNING, logger="gpudash.exporter"):
        text = _exposition(tmp_path, room)
    stored, widest = _widest(text)
    assert stored <= MAX_LABELS_PER_SERIES, widest
    assert {"hpc_job", "pod", "namespace", "container", "pod_uid"} <= widest.keys()
    kept = sorted(name for name in widest if name.startswith("example_com_label_"))
    assert kept == [f"example_com_label_{n:02d}" for n in range(room)]  # the first by name
    assert sum("60 allowed labels, more than the 9 that fit" in r.getMessage() for r in caplog.records) == 1


def test_with_dra_claims_the_pod_labels_get_less_room(tmp_path: Path) -> None:
    room = pod_label_room(("pod_uid", *DRA_LABELS))
    stored, widest = _widest(_exposition(tmp_path, room, dra=True))
    assert stored <= MAX_LABELS_PER_SERIES, widest
    assert set(DRA_LABELS) <= widest.keys() and room == sum(n.startswith("example_com_") for n in widest) == 2


def test_without_the_cap_the_same_pod_would_break_the_limit(tmp_path: Path) -> None:
    stored, _ = _widest(_exposition(tmp_path, None))
    assert stored > MAX_LABELS_PER_SERIES
