"""alertmanager.yml: a route per action, the job owner's routes, the heartbeat, inhibitions, and receivers
from the site config.

Critical alerts page on-call, one route per action (reset_gpu, reboot_node, drain, rma, and a last one for a
critical alert without a GPU action), grouped by cluster, rack, alert and action: a rack or fabric event is
one page, not one per node. Alerts whose action is `rma` also go first to the site's `rma_receivers` (a
ticket queue) when it names any, with `continue: true`, so they page as well. Alerts for a job's owner
(action restart_job, or the label `audience="job_owner"`) go to the owner within minutes
(`alertmanager.job_owner`), chosen by the value of the site's owner label (`job_owners:`). Warnings and info
wait and arrive as one digest per cluster. The Watchdog goes to the heartbeat receivers and never to on-call;
GPUNodeDrained to no one: it holds back its node's GPU and port alerts (inhibit_rules), as GPUFellOffBus holds back
every other alert of its GPU. Secrets are never written: every secret option becomes a `*_file` field. A
secret named by an environment variable becomes `<SECRETS_DIR>/<VARIABLE>`, a file the deployment writes
from that variable before Alertmanager starts (docs/alerts.md, "Deploying alertmanager.yml").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudash.catalog import profile as catalog_profile
from gpudash.config.loading import Settings
from gpudash.config.receivers import Receiver
from gpudash.config.site import Site
from gpudash.config.site_alerting import (
    CRITICAL_RECEIVER,
    DIGEST_RECEIVER,
    HEARTBEAT_RECEIVER,
    JOB_OWNER_RECEIVER,
    NULL_RECEIVER,
    RMA_RECEIVER,
    owner_receiver,
    receiver_sets,
)
from gpudash.config.thresholds import NotificationTiming
from gpudash.escape import am_matcher, go_template_text, re2_any
from gpudash.rules.node_state import NODE_DRAINED, WATCHDOG

SECRETS_DIR = "/etc/alertmanager/secrets"

# A route per action that pages on-call when critical (restart_job goes to the job's owner, none to the digest
# unless critical); each a page per cluster, rack and alert, so a rack or fabric event is one notification.
PAGED_ACTIONS = ("reset_gpu", "reboot_node", "drain", "rma")
PAGE_GROUP_BY = ["cluster", "rack", "alertname", "action"]

# The root route's timing reaches only an alert without a known severity; the severity routes below it
# take theirs from thresholds.yaml (`alertmanager.critical`, `alertmanager.digest`).
_TOP = {"group_wait": "30s", "group_interval": "5m", "repeat_interval": "4h"}

# Alerts that name why one GPU is slow: each silences GPUJobStraggler on the same GPU, a symptom of it in the job.
STRAGGLER_CAUSES = ("GPUHighTemperature", "GPUThermalThrottling", "GPUXidError", "GPUJobStalled")

_SLACK_TITLE = "[{{ .Status | toUpper }}] {{ .CommonLabels.alertname }} ({{ .CommonLabels.cluster }})"
_SLACK_TEXT = "{{ range .Alerts }}{{ .Annotations.summary }}\n{{ end }}"


def _secret_file(receiver: Receiver, key: str) -> str | None:
    """The file a secret is read from: given directly (`<key>_file`) or by environment variable."""
    path = receiver.option(f"{key}_file")
    env = receiver.option(f"{key}_env")
    if path:
        return path
    if env:
        return f"{SECRETS_DIR}/{env}"
    return None


def _receiver_sets(site: Site) -> dict[str, tuple[Receiver, ...]]:
    return receiver_sets(site.receivers, site.rma_receivers, site.alerting)


def receiver_secret_files(site: Site) -> list[Path]:
    """Every file alertmanager.yml reads a secret from (given as `*_file`, or `SECRETS_DIR/<VAR>` for `*_env`)."""
    found = (_secret_file(r, key) for receivers in _receiver_sets(site).values() for r in receivers
             for key in ("url", "api_url", "auth_password"))
    return sorted({Path(path) for path in found if path})


def _notifier(receiver: Receiver) -> tuple[str, dict[str, Any]]:
    """One notifier config; the site config was checked to hold what each kind needs."""
    if receiver.kind == "webhook":
        if receiver.option("url"):
            return "webhook_configs", {"url": receiver.option("url"), "send_resolved": True}
        return "webhook_configs", {"url_file": _secret_file(receiver, "url"), "send_resolved": True}
    if receiver.kind == "slack":
        config: dict[str, Any] = {"api_url_file": _secret_file(receiver, "api_url")}
        if receiver.option("channel"):
            config["channel"] = go_template_text(receiver.option("channel"))
        config.update({"send_resolved": True, "title": _SLACK_TITLE, "text": _SLACK_TEXT})
        return "slack_configs", config
    # `to` and `from` are Go templates in Alertmanager; smarthost is a plain host:port.
    config = {"to": go_template_text(receiver.option("to")), "from": go_template_text(receiver.option("from")),
              "smarthost": receiver.option("smarthost")}
    if receiver.option("auth_username"):
        config["auth_username"] = receiver.option("auth_username")
        password = _secret_file(receiver, "auth_password")
        if password:
            config["auth_password_file"] = password
    config["send_resolved"] = True
    return "email_configs", config


def _receiver(name: str, receivers: tuple[Receiver, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    for receiver in receivers:
        kind, config = _notifier(receiver)
        out.setdefault(kind, []).append(config)
    return out


def _timing(timing: NotificationTiming) -> dict[str, str]:
    return {"group_wait": str(timing.group_wait), "group_interval": str(timing.group_interval),
            "repeat_interval": str(timing.repeat_interval)}


def _page(settings: Settings, action: str | None) -> dict[str, Any]:
    """Critical alerts (of one action) to on-call: one page per cluster, rack, alert and action."""
    matchers = [am_matcher("severity", "critical"), *((am_matcher("action", action),) if action else ())]
    return {"matchers": matchers, "receiver": CRITICAL_RECEIVER, "group_by": PAGE_GROUP_BY,
            **_timing(settings.thresholds.alertmanager.critical)}


def _to_job_owner(settings: Settings, matcher: str) -> dict[str, Any]:
    """Alerts matching `matcher` to the job's owner: by the owner label's value, else the default receiver."""
    site = settings.site
    owners = site.alerting.job_owners
    group_by = ["cluster", *((owners.label,) if owners.label else ()), site.job_label, "alertname"]
    route: dict[str, Any] = {"matchers": [matcher], "receiver": JOB_OWNER_RECEIVER,
                             "group_by": list(dict.fromkeys(group_by)),
                             **_timing(settings.thresholds.alertmanager.job_owner)}
    if owners.owners:
        route["routes"] = [{"matchers": [am_matcher(owners.label, value)], "receiver": owner_receiver(value)}
                           for value, _ in owners.owners]
    return route


def _routes(settings: Settings) -> list[dict[str, Any]]:
    """The route tree's children, in the order Alertmanager tries them (the first match wins, but for rma)."""
    site = settings.site
    am = settings.thresholds.alertmanager
    heartbeat = HEARTBEAT_RECEIVER if site.alerting.heartbeat_receivers else NULL_RECEIVER
    routes: list[dict[str, Any]] = [
        # the heartbeat, one group per Prometheus (all its labels): never on-call
        {"matchers": [am_matcher("alertname", WATCHDOG)], "receiver": heartbeat, "group_by": ["..."],
         **_timing(am.heartbeat)},
        # a node out of service: its alert only holds back the node's others (inhibit_rules), it tells no one
        {"matchers": [am_matcher("alertname", NODE_DRAINED)], "receiver": NULL_RECEIVER},
    ]
    if site.rma_receivers:
        # `continue`: the ticket is filed and the alert still pages below (the card must come out of service)
        routes.append({"matchers": [am_matcher("action", "rma")], "receiver": RMA_RECEIVER,
                       "group_by": ["cluster", "instance", catalog_profile(site.profile).gpu_label, "alertname"],
                       "continue": True, **_timing(am.digest)})
    routes += [_to_job_owner(settings, am_matcher("action", "restart_job")),
               _to_job_owner(settings, am_matcher("audience", "job_owner"))]
    routes += [_page(settings, action) for action in PAGED_ACTIONS]
    routes += [
        _page(settings, None),  # a critical alert without a GPU action (an exporter down) pages too
        # warnings and info share the digest; never a page
        {"matchers": [am_matcher("severity", "warning|info", "=~")], "receiver": DIGEST_RECEIVER,
         "group_by": ["cluster"], **_timing(am.digest)},
    ]
    return routes


def _inhibit_rules(site: Site) -> list[dict[str, Any]]:
    gpu = catalog_profile(site.profile).gpu_label
    return [
        {
            # A node out of service holds back its GPU alerts. The source must name its node: Alertmanager
            # takes a label both alerts lack as equal, so a source without instance would silence every alert.
            "source_matchers": [am_matcher("alertname", NODE_DRAINED), am_matcher("instance", ".+", "=~")],
            "target_matchers": [am_matcher("alertname", "GPU.+", "=~"), am_matcher("alertname", NODE_DRAINED, "!=")],
            "equal": ["cluster", "instance"],
        },
        {
            # ... and its InfiniBand port alerts, which carry node_exporter's instance: both carry the node's host.
            "source_matchers": [am_matcher("alertname", NODE_DRAINED), am_matcher("host", ".+", "=~")],
            "target_matchers": [am_matcher("alertname", "GPU.+", "=~"), am_matcher("alertname", NODE_DRAINED, "!=")],
            "equal": ["cluster", "host"],
        },
        {
            # A target that is down (the exporter or its whole node) silences that instance's GPU alerts; not the
            # node's port alerts: node_exporter is another target, and a port it reports down is a fault of its own.
            "source_matchers": [am_matcher("alertname", "GPUExporterDown"), am_matcher(gpu, "")],
            "target_matchers": [am_matcher("alertname", "GPU.+", "=~")],
            "equal": ["cluster", "instance"],
        },
        {
            # A GPU off the bus explains everything else it raises (no temperature, XID 79, silent).
            "source_matchers": [am_matcher("alertname", "GPUFellOffBus"), am_matcher(gpu, ".+", "=~")],
            "target_matchers": [am_matcher("alertname", "GPUFellOffBus", "!=")],
            "equal": ["cluster", "instance", gpu],
        },
        {
            # Critical silences the warning of the same alert on the same GPU.
            "source_matchers": [am_matcher("severity", "critical")],
            "target_matchers": [am_matcher("severity", "warning")],
            "equal": ["alertname", "cluster", "instance", gpu],
        },
        {
            # A GPU already alerting for heat, throttling, an XID or a hang: its straggling is that, in its job.
            "source_matchers": [am_matcher("alertname", re2_any(STRAGGLER_CAUSES), "=~")],
            "target_matchers": [am_matcher("alertname", "GPUJobStraggler")],
            "equal": ["cluster", "instance", gpu],
        },
    ]


def alertmanager_config(settings: Settings) -> dict[str, Any]:
    site = settings.site
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": CRITICAL_RECEIVER,
            "group_by": ["cluster", "instance", "alertname"],
            **_TOP,
            "routes": _routes(settings),
        },
        "inhibit_rules": _inhibit_rules(site),
        "receivers": [_receiver(name, receivers) for name, receivers in _receiver_sets(site).items()],
    }
