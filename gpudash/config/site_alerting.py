"""The site config's alerting sections beyond `receivers:` and `rma_receivers:`: who owns a job's alerts
(`job_owners:`), who hears the Watchdog (`heartbeat_receivers:`), the nodes under maintenance
(`maintenance:`) and the racks of nodes the scrape targets do not place (`racks:`).

gpudash.rules.alertmanager routes by them (to the receivers `receiver_sets` names, which the Prometheus
Operator's resource reads too), gpudash.rules.node_state turns `maintenance:` into an alert that
holds back a node's GPU alerts, and gpudash.rules.scrape turns the racks into a `rack` label on every alert.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudash.config.fields import FieldReader, name_problem, show
from gpudash.config.receivers import Receiver, parse_receivers, unique

# A Prometheus label name that a site may name (not one of Prometheus' reserved `__` names).
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def label_name_problem(value: str) -> str | None:
    if not LABEL_NAME.fullmatch(value) or value.startswith("__"):
        return f"expected a Prometheus label name (letters, digits, _; not starting with a digit or __), got {value!r}"
    return None


@dataclass(frozen=True)
class JobOwners:
    """Where alerts for a job's owner go: by the value of `label` on the alert, else to `default`."""

    label: str = ""  # "": no owner label, every job alert goes to `default`
    owners: tuple[tuple[str, tuple[Receiver, ...]], ...] = ()  # (label value, its receivers), in site order
    default: tuple[Receiver, ...] = ()  # (): the site's `receivers`


@dataclass(frozen=True)
class Rack:
    name: str
    nodes: tuple[str, ...]  # node names, as Slurm or Kubernetes name them (the exporter's instance, port removed)


@dataclass(frozen=True)
class Alerting:
    job_owners: JobOwners = field(default_factory=JobOwners)
    heartbeat_receivers: tuple[Receiver, ...] = ()  # (): the Watchdog reaches nobody
    maintenance: tuple[str, ...] = ()  # node names whose GPU alerts are held back
    racks: tuple[Rack, ...] = ()


# The receivers alertmanager.yml names (gpudash.rules.alertmanager routes to them).
CRITICAL_RECEIVER = "gpudash-critical"
DIGEST_RECEIVER = "gpudash-warning-digest"
RMA_RECEIVER = "gpudash-rma"
JOB_OWNER_RECEIVER = "gpudash-job-owner"  # the default owner's; an owner listed in gpudash.yaml: owner_receiver
HEARTBEAT_RECEIVER = "gpudash-heartbeat"
NULL_RECEIVER = "gpudash-null"  # no notifier: what reaches it is dropped


def receiver_sets(receivers: tuple[Receiver, ...], rma_receivers: tuple[Receiver, ...],
                  alerting: Alerting) -> dict[str, tuple[Receiver, ...]]:
    """Every receiver alertmanager.yml names, in its order, with the site's receivers (`receivers:`,
    `rma_receivers:` and `alerting`'s) it notifies; none: the null receiver, which drops what reaches it."""
    owners = alerting.job_owners
    named: dict[str, tuple[Receiver, ...]] = {
        CRITICAL_RECEIVER: receivers, DIGEST_RECEIVER: receivers, JOB_OWNER_RECEIVER: owners.default or receivers,
    }
    named.update({owner_receiver(value): of_owner for value, of_owner in owners.owners})
    if rma_receivers:
        named[RMA_RECEIVER] = rma_receivers
    if alerting.heartbeat_receivers:
        named[HEARTBEAT_RECEIVER] = alerting.heartbeat_receivers
    named[NULL_RECEIVER] = ()
    return named


def owner_receiver(value: str) -> str:
    """The receiver of the job owner whose owner label reads `value`."""
    return f"{JOB_OWNER_RECEIVER}-{value}"


def _names(reader: FieldReader, key: str, what: str, seen: dict[str, str] | None = None) -> tuple[str, ...]:
    """A list of names (absent: none); each one a name, none given twice (across lists sharing `seen`)."""
    value = reader.data.get(key, [])
    reader.used.add(key)
    if not isinstance(value, list):
        reader.fail(f"expected a list of {what}s, got {show(value)}", key)
    seen = {} if seen is None else seen
    names = []
    for index, item in enumerate(value):
        where = f"{key}[{index}]"
        if not isinstance(item, str) or not item:
            reader.fail(f"expected a {what} (text), got {show(item)}", where)
        reader.checked(where, item, name_problem)
        unique(reader, where, item, seen, what)
        names.append(item)
    return tuple(names)


def _job_owners(top: FieldReader) -> JobOwners:
    section = top.section("job_owners", required=False)
    label = section.checked("label", section.string("label"), label_name_problem) if section.has("label") else ""
    owners = []
    values: dict[str, str] = {}
    for _, owner in section.items("owners"):
        value = owner.string("value")
        unique(owner, "value", value, values, "owner")
        receivers = parse_receivers(owner)
        if not receivers:
            owner.fail("expected at least one receiver", "receivers")
        owner.done()
        owners.append((value, receivers))
    if owners and not label:
        section.fail("owners are told apart by a label: name it (e.g. label: namespace)", "label")
    default = parse_receivers(section, "default_receivers")
    section.done()
    return JobOwners(label, tuple(owners), default)


def _racks(top: FieldReader) -> tuple[Rack, ...]:
    racks = []
    names: dict[str, str] = {}
    nodes: dict[str, str] = {}
    for _, r in top.items("racks"):
        name = r.string("name")
        unique(r, "name", name, names, "rack")
        members = _names(r, "nodes", "node name", nodes)
        if not members:
            r.fail("expected at least one node name", "nodes")
        r.done()
        racks.append(Rack(name, members))
    return tuple(racks)


def parse_alerting(top: FieldReader) -> Alerting:
    """The alerting sections of the site config's top level (each absent: its default)."""
    return Alerting(
        job_owners=_job_owners(top),
        heartbeat_receivers=parse_receivers(top, "heartbeat_receivers"),
        maintenance=_names(top, "maintenance", "node name"),
        racks=_racks(top),
    )
