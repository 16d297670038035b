"""gpudash.yaml's alerting sections (gpudash.config.site_alerting): job owners, heartbeat receivers, the
maintenance list and racks, each read with one-line errors naming the file and key."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support.paths import ROOT

from gpudash.config.loading import load_settings
from gpudash.config.site import Site, parse_site
from gpudash.errors import ConfigError
from gpudash.rules.alert_spec import target_labels

HOOK = {"name": "h", "type": "webhook", "url": "https://hooks.example.org/x"}


def test_absent_sections_give_no_owners_no_heartbeat_no_maintenance_no_racks() -> None:
    alerting = parse_site("s.yml", {}).alerting
    assert alerting == Site().alerting
    assert (alerting.job_owners.label, alerting.job_owners.owners, alerting.job_owners.default) == ("", (), ())
    assert (alerting.heartbeat_receivers, alerting.maintenance, alerting.racks) == ((), (), ())


def test_every_section_is_read() -> None:
    alerting = parse_site("s.yml", {
        "job_owners": {"label": "namespace", "default_receivers": [HOOK],
                       "owners": [{"value": "physics", "receivers": [HOOK]}, {"value": "vision", "receivers": [HOOK]}]},
        "heartbeat_receivers": [HOOK],
        "maintenance": ["gpu017", "gpu018"],
        "racks": [{"name": "r1", "nodes": ["gpu001", "gpu002"]}, {"name": "r2", "nodes": ["gpu003"]}],
    }).alerting
    owners = alerting.job_owners
    assert owners.label == "namespace" and [v for v, _ in owners.owners] == ["physics", "vision"]
    assert [r.name for _, rs in owners.owners for r in rs] == ["h", "h"] and owners.default[0].name == "h"
    assert [r.option("url") for r in alerting.heartbeat_receivers] == [HOOK["url"]]
    assert alerting.maintenance == ("gpu017", "gpu018")
    assert [(r.name, r.nodes) for r in alerting.racks] == [("r1", ("gpu001", "gpu002")), ("r2", ("gpu003",))]


@pytest.mark.parametrize(("data", "message"), [
    ({"job_owners": {"owners": [{"value": "a", "receivers": [HOOK]}]}},
     "s.yml: job_owners.label: owners are told apart by a label: name it (e.g. label: namespace)"),
    ({"job_owners": {"label": "kube-namespace"}},
     "s.yml: job_owners.label: expected a Prometheus label name (letters, digits, _; not starting with a digit "
     "or __), got 'kube-namespace'"),
    ({"job_owners": {"label": "namespace", "owners": [{"value": "a", "receivers": []}]}},
     "s.yml: job_owners.owners[0].receivers: expected at least one receiver"),
    ({"job_owners": {"label": "namespace", "owners": [{"value": "a", "receivers": [HOOK]},
                                                      {"value": "a", "receivers": [HOOK]}]}},
     "s.yml: job_owners.owners[1].value: owner 'a' is given twice (first at job_owners.owners[0].value)"),
    ({"job_owners": {"label": "namespace",
                     "owners": [{"value": "a", "receivers": [{"name": "x", "type": "webhook"}]}]}},
     "s.yml: job_owners.owners[0].receivers[0]: a webhook receiver needs url, url_file or url_env"),
    ({"job_owners": {"lable": "namespace"}}, "s.yml: job_owners: unknown key 'lable' (known keys: "),
    ({"heartbeat_receivers": [{"name": "x", "type": "pager"}]},
     "s.yml: heartbeat_receivers[0].type: expected one of webhook, slack, email, got 'pager'"),
    ({"maintenance": "gpu017"}, "s.yml: maintenance: expected a list of node names, got 'gpu017'"),
    ({"maintenance": ["gpu017", 18]}, "s.yml: maintenance[1]: expected a node name (text), got 18"),
    ({"maintenance": ["gpu017", "gpu017"]},
     "s.yml: maintenance[1]: node name 'gpu017' is given twice (first at maintenance[0])"),
    ({"maintenance": ["gpu\n017"]}, "s.yml: maintenance[0]: expected text without control characters"),
    ({"racks": [{"name": "r1", "nodes": []}]}, "s.yml: racks[0].nodes: expected at least one node name"),
    ({"racks": [{"name": "r1", "nodes": ["a"]}, {"name": "r2", "nodes": ["a"]}]},
     "s.yml: racks[1].nodes[0]: node name 'a' is given twice (first at racks[0].nodes[0])"),
    ({"racks": [{"name": "r1", "nodes": ["a"]}, {"name": "r1", "nodes": ["b"]}]},
     "s.yml: racks[1].name: rack 'r1' is given twice (first at racks[0].name)"),
])
def test_a_wrong_alerting_section_is_one_line_naming_the_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_site("s.yml", data)
    text = info.value.format_message()
    assert text.startswith(message) and "\n" not in text, text


def test_the_owner_label_joins_what_a_job_alert_must_carry() -> None:
    settings = load_settings(ROOT / "thresholds.yaml")
    assert "account" not in target_labels(settings, ("job",))
    site = parse_site("s.yml", {"job_owners": {"label": "account"}})
    owned = replace(settings, site=site)
    assert target_labels(owned, ("job",)) == (site.job_label, "namespace", "pod", "account")
    assert "account" not in target_labels(owned, ("card",))
