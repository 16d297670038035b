"""Gauges and bar gauges as Grafana lists them: each panel's reduce and sortBy steps applied to instant answers
shaped as Prometheus gives them (GPUs in hash order), then the rows' titles and order checked."""

from __future__ import annotations

from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all
from gpudash.preview.colors import NAMED, threshold_color
from gpudash.preview.panel import column_units
from gpudash.preview.series import Series, table_rows, to_series
from gpudash.preview.units import format_value
from gpudash.preview.value_rows import value_rows

HASH_ORDER = ("04", "00", "06", "02", "10", "01")


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, Any]]:
    return build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")


def panel(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    found = [p for p in dashboard["panels"] if p.get("title") == title]
    assert found, f"no panel {title!r}"
    return found[0]


def answer(p: dict[str, Any], values: dict[tuple[str, str], float]) -> list[Series]:
    """An instant answer with one series per (instance, GPU), in the order given, named by the legend."""
    result = [{"metric": {"cluster": "demo", "gpu": gpu, "instance": instance}, "value": [1000.0, str(v)]}
              for (instance, gpu), v in values.items()]
    return list(to_series(result, p["targets"][0].get("legendFormat"), "A"))


@pytest.mark.parametrize("title", ["Memory used per GPU", "Power against limit", "GPU temperature",
                                   "HBM temperature"])
def test_node_gauges_list_gpus_in_index_order_titled_by_their_legend(built: dict[str, Any], title: str) -> None:
    p = panel(built["gpudash-node.json"], title)
    rows = value_rows(p, answer(p, {("host", gpu): 0.5 for gpu in HASH_ORDER}))
    shown = [r.name for r in rows]
    assert shown == [f"host GPU {gpu}" for gpu in sorted(HASH_ORDER)], shown


@pytest.mark.parametrize(("uid", "title", "link"), [
    ("gpudash-fleet.json", "Hottest GPUs (top 10)", True), ("gpudash-job.json", "Fullest GPUs (top 10)", True)])
def test_top_k_gauges_list_the_highest_first_titled_by_node_and_gpu(built: dict[str, Any], uid: str, title: str,
                                                                     link: bool) -> None:
    p = panel(built[uid], title)
    values = {("host-b", "03"): 71.0, ("host-a", "01"): 88.0, ("host-a", "07"): 64.0}
    rows = value_rows(p, answer(p, values))
    assert [r.name for r in rows] == ["host-a GPU 01", "host-b GPU 03", "host-a GPU 07"]
    assert [r.last for r in rows] == [88.0, 71.0, 64.0]
    # The link reads the row's labels: they stay fields of the reduced table.
    assert all(r.labels["instance"] and r.labels["gpu"] and r.labels["cluster"] for r in rows) == link


def test_a_sort_on_a_column_the_table_lacks_leaves_the_answers_order() -> None:
    wrong = {"transformations": [
        {"id": "reduce", "options": {"reducers": ["lastNotNull"], "mode": "seriesToRows", "labelsToFields": True}},
        {"id": "sortBy", "options": {"sort": [{"field": "GPU", "desc": False}]}}]}
    series = [Series(f"GPU {g}", {"gpu": g}, (0.0,), (1.0,)) for g in HASH_ORDER]
    assert [r.labels["gpu"] for r in value_rows(wrong, series)] == list(HASH_ORDER)


def test_labels_as_fields_title_a_row_by_its_text_cells_as_grafana_does() -> None:
    # What Grafana shows for reduce(labelsToFields) without a display name: "Value", then each label's value.
    p = {"transformations": [{"id": "reduce", "options": {"reducers": ["lastNotNull"], "mode": "seriesToRows",
                                                          "labelsToFields": True}}]}
    series = [Series("GPU 04", {"cluster": "demo", "gpu": "04", "instance": "host"}, (0.0,), (1.0,))]
    assert [r.name for r in value_rows(p, series)] == ["Value demo 04 host"]


def test_throttled_gpus_lists_each_gpu_once_with_both_tests(built: dict[str, Any]) -> None:
    # Each recording's answer carries its own metric name, as a topk of a recorded series does.
    p = panel(built["gpudash-fleet.json"], "Throttled GPUs now (top 10)")
    frames = []
    for target, value in zip(p["targets"], ("0.61", "2"), strict=True):
        record = target["expr"].split("(", 1)[1].split("{", 1)[0].split(", ", 1)[1]
        result = [{"metric": {"__name__": record, "cluster": "demo", "gpu": gpu, "instance": "host"},
                   "value": [1000.0, value]} for gpu in ("03", "05")]
        frames.append((target["refId"], to_series(result, None, target["refId"])))
    header, rows = table_rows(p, frames)
    assert "__name__" not in header
    assert [[row[header.index(c)] for c in ("gpu", "SM clock / max", "throttle reasons")] for row in rows] == [
        ["03", 0.61, 2.0], ["05", 0.61, 2.0]]


@pytest.mark.parametrize(("what", "margin"), [("GPU core", "gpu_margin"), ("HBM", "hbm_margin")])
def test_headroom_lists_the_gpu_nearest_its_limit_first_orange_within_the_margin(built: dict[str, Any], what: str,
                                                                                 margin: str) -> None:
    p = panel(built["gpudash-health.json"], f"{what} headroom: the 10 closest to their limit")
    within = getattr(load_settings(ROOT / "thresholds.yaml").thresholds.temperature, margin)
    values = {("host-a", "01"): within + 9, ("host-b", "02"): within - 1, ("host-a", "05"): -1.0,
              ("host-c", "00"): within + 0.5}
    rows = value_rows(p, answer(p, values))
    assert [r.name for r in rows] == ["host-a GPU 05", "host-b GPU 02", "host-c GPU 00", "host-a GPU 01"]
    shown = [threshold_color(p, r.last, 0, 40) for r in rows]
    assert shown == [NAMED["red"], NAMED["orange"], NAMED["green"], NAMED["green"]], shown


def test_memory_pressure_shows_used_as_a_percentage_and_hours_until_full_as_time(built: dict[str, Any]) -> None:
    p = next(x for x in built["gpudash-fleet.json"]["panels"] if x.get("title", "").startswith("Memory pressure"))
    labels = {"cluster": "demo", "gpu": "03", "instance": "host"}
    frames = [(t["refId"], to_series([{"metric": labels, "value": [1000.0, v]}], None, t["refId"]))
              for t, v in zip(p["targets"], ("0.93", "0.93"), strict=True)]
    header, rows = table_rows(p, frames)
    units = column_units(p, header)
    shown = {h: (u, format_value(float(v), u)) for h, v, u in zip(header, rows[0], units, strict=True)
             if h in ("hours until full", "used")}
    assert shown == {"hours until full": ("h", "0.930 hour"), "used": ("percentunit", "93%")}, shown


@pytest.mark.parametrize(("uid", "prefix"), [("gpudash-node.json", "Memory per process"),
                                             ("gpudash-job.json", "Processes on the job's GPUs")])
def test_process_tables_show_the_process_and_its_memory_not_the_gpus_every_label(built: dict[str, Any], uid: str,
                                                                                  prefix: str) -> None:
    p = next(x for x in built[uid]["panels"] if x.get("title", "").startswith(prefix))
    labels = {"__name__": "gpudash_process_fb_used_mib", "cluster": "demo", "instance": "host:9400",
              "job": "gpu-exporter", "gpu": "0", "UUID": "GPU-0", "pci_bus_id": "00000000:1B:00.0",
              "device": "nvidia0", "modelName": "NVIDIA H200", "hostname": "host", "DCGM_FI_DRIVER_VERSION": "570.1",
              "hpc_job": "77", "pid": "4242", "process_name": "python"}
    header, rows = table_rows(p, [("A", to_series([{"metric": labels, "value": [1000.0, "56422"]}], None, "A"))])
    assert set(header) == {"cluster", "instance", "gpu", "hpc_job", "pid", "process_name", "memory used"}, header
    units = column_units(p, header)
    used = header.index("memory used")
    assert format_value(float(rows[0][used]), units[used]) == "55.1 GiB"


def test_a_table_lists_its_rows_in_the_order_of_its_sort_step(built: dict[str, Any]) -> None:
    p = next(x for x in built["gpudash-fleet.json"]["panels"] if x.get("title", "").startswith("Memory pressure"))
    hours = {"01": "30", "02": "2.5", "03": "9"}
    frames = []
    for target in p["targets"]:
        result = [{"metric": {"cluster": "demo", "gpu": gpu, "instance": "host"},
                   "value": [1000.0, h if target["refId"] == "A" else "0.95"]} for gpu, h in hours.items()]
        frames.append((target["refId"], to_series(result, None, target["refId"])))
    header, rows = table_rows(p, frames)
    assert [row[header.index("gpu")] for row in rows] == ["02", "03", "01"]  # soonest to fill first
    unsorted = {**p, "transformations": [t for t in p["transformations"] if t["id"] != "sortBy"]}
    assert [row[header.index("gpu")] for row in table_rows(unsorted, frames)[1]] == ["01", "02", "03"]
