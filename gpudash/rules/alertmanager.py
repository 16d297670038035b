"""alertmanager.yml: routes by cluster and severity, inhibitions, receivers from the site config.

Critical alerts go straight through; warnings and info (a job holding idle GPUs) wait and arrive as one
digest per cluster; nothing but critical pages. Alerts whose action is `rma` also go to the site's
`rma_receivers` (a ticket queue) when it names any: that route comes first and has `continue: true`, so the
alert then follows the severity routes as well (the GPU still needs someone now; the ticket tracks the
replacement). GPUFellOffBus silences every other alert of the same GPU. Secrets are never
written: every secret option becomes a `*_file` field. A secret named by an environment variable becomes
`<SECRETS_DIR>/<VARIABLE>`, a file the deployment writes from that variable before Alertmanager starts
(docs/alerts.md, "Deploying alertmanager.yml").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudash.catalog import profile as catalog_profile
from gpudash.config.loading import Settings
from gpudash.config.site import Receiver, Site
from gpudash.config.thresholds import NotificationTiming
from gpudash.escape import am_matcher, go_template_text, re2_any

SECRETS_DIR = "/etc/alertmanager/secrets"
CRITICAL_RECEIVER = "gpudash-critical"
DIGEST_RECEIVER = "gpudash-warning-digest"
RMA_RECEIVER = "gpudash-rma"

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


def receiver_secret_files(site: Site) -> list[Path]:
    """Every file alertmanager.yml reads a secret from (given as `*_file`, or `SECRETS_DIR/<VAR>` for `*_env`)."""
    found = (_secret_file(r, key) for r in (*site.receivers, *site.rma_receivers)
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


def _severity_routes(settings: Settings) -> list[dict[str, Any]]:
    am = settings.thresholds.alertmanager
    return [
        {"matchers": [am_matcher("severity", "critical")], "receiver": CRITICAL_RECEIVER, **_timing(am.critical)},
        # warnings and info share the digest; never a page
        {"matchers": [am_matcher("severity", "warning|info", "=~")], "receiver": DIGEST_RECEIVER,
         "group_by": ["cluster"], **_timing(am.digest)},
    ]


def alertmanager_config(settings: Settings) -> dict[str, Any]:
    site = settings.site
    gpu = catalog_profile(site.profile).gpu_label
    routes = [
        {"matchers": [am_matcher("cluster", cluster.name)], "routes": _severity_routes(settings)}
        for cluster in site.clusters
    ]
    routes += _severity_routes(settings)  # alerts from a cluster the site config does not list
    receivers = [_receiver(CRITICAL_RECEIVER, site.receivers), _receiver(DIGEST_RECEIVER, site.receivers)]
    if site.rma_receivers:
        # first, and `continue`: the ticket is filed and the alert still pages by its severity below
        routes.insert(0, {"matchers": [am_matcher("action", "rma")], "receiver": RMA_RECEIVER,
                          "group_by": ["cluster", "instance", gpu, "alertname"], "continue": True,
                          **_timing(settings.thresholds.alertmanager.digest)})
        receivers.append(_receiver(RMA_RECEIVER, site.rma_receivers))
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": CRITICAL_RECEIVER,
            "group_by": ["cluster", "instance", "alertname"],
            **_TOP,
            "routes": routes,
        },
        "inhibit_rules": [
            {
                # A target that is down (the exporter or its whole node) silences that instance's GPU alerts.
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
        ],
        "receivers": receivers,
    }
