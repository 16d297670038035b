"""Energy over a range and the node's last XID, evaluated by promtool on series shaped as dcgm-exporter
publishes them.

Energy is the rise of each GPU's energy counter, so a stretch without recorded power (missed scrapes or
rule evaluations longer than the lookback) loses nothing; the recorded power added up over a subquery
did. The node's "Last XID error" marks the step a GPU's last-XID gauge changes to a code, not every step
after it for as long as the gauge holds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.rounded import rounded
from test_panel_queries_promtool import labels, promtool_case
from test_rules_promtool import ROOT

from gpudash.config.loading import load_settings
from gpudash.panels.build import build_all


def _expr(uid: str, title: str, **values: str) -> str:
    built = build_all(load_settings(ROOT / "thresholds.yaml"), ROOT / "dashboards")
    panel: dict[str, Any] = next(p for p in built[f"{uid}.json"]["panels"] if p.get("title") == title)
    text = str(panel["targets"][0]["expr"])
    for name, value in {"cluster": ".*", "instance": ".*", "gpu": ".*", **values}.items():
        text = text.replace(f"${name}", value)
    return text


def test_energy_in_range_keeps_what_was_drawn_while_power_was_not_recorded(tmp_path: Path) -> None:
    energy = _expr("gpudash-fleet", "Energy in range", __range="30m")
    inputs = [
        # two GPUs drawing 1000 W each: 6e7 mJ a minute on the counter, for 30 minutes
        {"series": f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{labels(gpu='0')}", "values": "0+60000000x30"},
        {"series": f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{labels(gpu='1')}", "values": "0+60000000x30"},
        # the recorded power per cluster, missing for nine minutes (evaluations or scrapes missed)
        {"series": 'cluster:gpu_power_watts:sum{cluster="a"}', "values": "2000x10 _x9 2000x10"},
    ]
    # 2 GPUs x 1 kW x 0.5 h
    promtool_case(tmp_path, inputs, [rounded({"expr": energy, "eval_time": "30m",
                                              "exp_samples": [{"labels": "{}", "value": 1.0}]})])


def test_the_last_xid_is_drawn_at_the_step_it_appeared_only(tmp_path: Path) -> None:
    last = _expr("gpudash-node", "Last XID error", __interval="1m")
    inputs = [
        # GPU 0 (no err_code label): 43 from minute 2, held; 0 again from minute 5; then 79 at minute 7
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='0')}", "values": "0 0 43 43 43 0 0 79 79 79"},
        # GPU 1 (dcgm-exporter with err_code): a constant 0 series, then a new err_code="31" one, held
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='1', err_code='0')}", "values": "0x9"},
        {"series": f"DCGM_FI_DEV_XID_ERRORS{labels(gpu='1', err_code='31')}", "values": "_ _ _ 31x6"},
    ]
    gpu0, gpu1 = labels(gpu="00"), labels(gpu="01")
    at = {2: [{"labels": gpu0, "value": 43}], 3: [{"labels": gpu1, "value": 31}], 4: [], 5: [],
          7: [{"labels": gpu0, "value": 79}], 8: [], 9: []}
    promtool_case(tmp_path, inputs, [{"expr": last, "eval_time": f"{m}m", "exp_samples": samples}
                                     for m, samples in at.items()])
