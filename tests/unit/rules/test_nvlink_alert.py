"""GPUNVLinkErrors' rules: corrected errors (replays, CRC errors) never page; a recovery or a CRC storm is
critical reset_gpu, carries the card and is latched (promtool runs them: tests/rules/nvlink.yaml)."""

from __future__ import annotations

from typing import Any

import yaml

from gpudash.config.loading import Settings
from gpudash.repository import ALERTS_FILE, RECORDING_FILE
from gpudash.rules.alert_spec import target_labels
from gpudash.rules.generated_files import render_all

RECOVERED = "cluster_instance_gpu_link:gpu_nvlink_recovery_errors:latched"
STORM = "cluster_instance_gpu_link:gpu_nvlink_crc_errors_per_second:storm"


def _nvlink(settings: Settings) -> dict[str, dict[str, Any]]:
    """The alert's rules by `nvlink_error`, and the recordings of its critical conditions by name."""
    files = render_all(settings)
    groups = yaml.safe_load(files[ALERTS_FILE])["groups"]
    rules = [r for g in groups for r in g["rules"] if r["alert"] == "GPUNVLinkErrors"]
    recorded = {r["record"]: r for g in yaml.safe_load(files[RECORDING_FILE])["groups"] for r in g["rules"]
                if r["record"] in (RECOVERED, STORM)}
    return {**{r["labels"]["nvlink_error"]: r for r in rules}, **recorded}


def test_only_a_recovery_or_a_storm_is_critical_and_both_ask_for_a_reset(settings: Settings) -> None:
    rules = _nvlink(settings)
    assert {k: (r["labels"]["severity"], r["labels"]["action"]) for k, r in rules.items() if "alert" in r} == {
        "recovery": ("critical", "reset_gpu"), "crc_storm": ("critical", "reset_gpu"), "wear": ("warning", "none")}
    # each critical rule reads its recording, which holds only the links in that state
    assert rules["recovery"]["expr"] == f"max by (cluster, instance, gpu, link, UUID, hostname) ({RECOVERED})"
    assert rules["crc_storm"]["expr"] == f"max by (cluster, instance, gpu, link, UUID, hostname) ({STORM})"
    critical = rules[RECOVERED]["expr"] + rules[STORM]["expr"]
    assert "replay" not in critical.lower()  # a replay is a retry that succeeded: never a page
    assert 'error=~"recovery"' in rules[RECOVERED]["expr"] and "RECOVERY" in rules[RECOVERED]["expr"]
    assert "increase(" not in critical and "rate(" not in rules[RECOVERED]["expr"]  # the counter itself latches


def test_the_critical_rules_carry_the_card_and_the_warning_does_not_need_to(settings: Settings) -> None:
    rules = _nvlink(settings)
    card = target_labels(settings, ("card",))
    assert card == ("UUID", "hostname")
    for name in (RECOVERED, STORM):
        for line in rules[name]["expr"].splitlines():
            if line.startswith("max by (cluster, instance, gpu, link"):
                assert line.startswith("max by (cluster, instance, gpu, link, UUID, hostname)"), line
            elif "DCGM_FI_DEV_NVLINK" in line:
                assert line.startswith("max by (cluster, instance, gpu, UUID, hostname)"), line


def test_the_storm_is_held_for_its_knob_and_the_recovery_by_its_counter(settings: Settings) -> None:
    rules = _nvlink(settings)
    n = settings.thresholds.alerts.nvlink
    assert rules["crc_storm"]["keep_firing_for"] == str(n.storm_keep_firing_for)
    assert "keep_firing_for" not in rules["recovery"] and "for" not in rules["recovery"]
    assert rules["wear"]["for"] == str(n.for_) and "keep_firing_for" not in rules["wear"]


def test_the_warning_counts_the_window_from_two_samples_and_gives_way_to_the_critical(settings: Settings) -> None:
    expr = _nvlink(settings)["wear"]["expr"]
    n = settings.thresholds.alerts.nvlink
    assert f"offset {n.window}) >= {n.crc_per_hour_warning * n.window.seconds / 3600:g})" in expr
    assert f"offset {n.window}) >= {n.replay_per_hour_warning * n.window.seconds / 3600:g})" in expr
    rising, *critical = expr.split("\n)\nunless on (cluster, instance, gpu, link)\n", 1)
    assert "[" not in rising  # no range over the window: the counter now less its value a window ago
    # the links where a critical rule fires, as recorded: no counter of every link read again
    assert critical == [f"{RECOVERED}\nunless on (cluster, instance, gpu, link)\n{STORM}"]

