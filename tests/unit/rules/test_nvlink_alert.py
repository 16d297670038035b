"""GPUNVLinkErrors' rules: corrected errors (replays, CRC errors) never page; a recovery or a CRC storm is
critical reset_gpu, carries the card and is latched (promtool runs them: tests/rules/nvlink.yaml)."""

from __future__ import annotations

from typing import Any

import yaml

from gpudash.config.loading import Settings
from gpudash.repository import ALERTS_FILE
from gpudash.rules.alert_spec import target_labels
from gpudash.rules.generated_files import render_all


def _nvlink(settings: Settings) -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(render_all(settings)[ALERTS_FILE])["groups"]
    rules = [r for g in groups for r in g["rules"] if r["alert"] == "GPUNVLinkErrors"]
    return {r["labels"]["nvlink_error"]: r for r in rules}


def test_only_a_recovery_or_a_storm_is_critical_and_both_ask_for_a_reset(settings: Settings) -> None:
    rules = _nvlink(settings)
    assert {k: (r["labels"]["severity"], r["labels"]["action"]) for k, r in rules.items()} == {
        "recovery": ("critical", "reset_gpu"), "crc_storm": ("critical", "reset_gpu"), "wear": ("warning", "none")}
    critical = rules["recovery"]["expr"] + rules["crc_storm"]["expr"]
    assert "replay" not in critical.lower()  # a replay is a retry that succeeded: never a page
    assert 'error=~"recovery"' in rules["recovery"]["expr"] and "RECOVERY" in rules["recovery"]["expr"]
    assert "increase(" not in critical and "rate(" not in rules["recovery"]["expr"]  # the counter itself latches


def test_the_critical_rules_carry_the_card_and_the_warning_does_not_need_to(settings: Settings) -> None:
    rules = _nvlink(settings)
    card = target_labels(settings, ("card",))
    assert card == ("UUID", "hostname")
    for name in ("recovery", "crc_storm"):
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
    rising, critical = expr.split("\n)\nunless on (cluster, instance, gpu, link)\n(\n")
    assert "[" not in rising  # no range over the window: the counter now less its value a window ago
    assert "> 0" in critical and f">= {n.crc_per_second_critical:g})" in critical

