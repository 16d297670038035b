"""Which site this repository is, settled before gpudash writes to Grafana or names a file for the site.

A site config with `site_id:` is that site. Without one, the first push, sync or provision gives the
repository a new id (gpudash.config.site_identity: a slug and 32 random bits) and writes it into the site
config, to be committed: every clone is then the same site, and no other repository is by accident. A diff,
a dry run or doctor uses a new id for that run and writes nothing.

Before making one up, gpudash looks for dashboards that may show the repository has an identity already:
a gpudash marker or version message for any site at one of its own dashboard uids, or a dashboard pushed for
the id gpudash derived from the clusters before (`legacy_site_id`) in that id's folder. Either may be this
repository's (an install from before, a run whose new site_id was not committed) or another repository's
with the same clusters and uids; only a person can tell, so gpudash stops (ConfigError, nothing written) and
names both answers: keep that id, or take a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpudash.compare.content import read_marker
from gpudash.config.loading import Settings
from gpudash.config.site import Site
from gpudash.config.site_identity import cluster_names, legacy_site_id, new_site_id, write_site_id
from gpudash.errors import ConfigError
from gpudash.repository import TAG
from gpudash.sync.apply import Echo, Target
from gpudash.sync.plan import Owner, RemoteDashboard, claim_of
from gpudash.sync.remote import GrafanaRemote

SHOWN = 3  # dashboards named per site in the question; the rest are counted


@dataclass(frozen=True)
class Sighting:
    """A dashboard (or a provisioning file) that names a site this repository may already be."""

    uid: str
    title: str
    site: str


def site_named(remote: RemoteDashboard, legacy: str) -> str | None:
    """The site a remote dashboard's marker or version history says pushed it, or None (no site named)."""
    claim = claim_of(remote, legacy)
    if claim.owner is Owner.THIS_SITE:
        return legacy
    return claim.detail if claim.owner is Owner.OTHER_SITE else None


def sightings(at_local_uids: Iterable[RemoteDashboard], in_legacy_folder: Iterable[RemoteDashboard],
              legacy: str) -> list[Sighting]:
    """At this repository's own uids, any site's dashboard; elsewhere in the folder, only the old id's."""
    seen = [Sighting(d.uid, d.title, site) for d in at_local_uids if (site := site_named(d, legacy))]
    return seen + [Sighting(d.uid, d.title, legacy) for d in in_legacy_folder if site_named(d, legacy) == legacy]


def question(where: str, seen: Sequence[Sighting], legacy: str, fresh: str) -> str:
    """One line: the sites found, the dashboards that name them, and the two answers."""
    by_site: dict[str, list[Sighting]] = {}
    for sighting in seen:
        by_site.setdefault(sighting.site, []).append(sighting)
    found = []
    for site, items in by_site.items():
        names = [f"{s.uid} {s.title!r}" if s.title else s.uid for s in items[:SHOWN]]
        more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
        whose = (" (the id gpudash derived from these clusters before it wrote one)" if site == legacy else "")
        found.append(f"site {site!r}{whose}: {', '.join(names)}{more}")
    keep = " or ".join(f"`site_id: {site}`" for site in by_site)
    return (f"{where}: no site_id yet, and what gpudash wrote before may be this repository's: {'; '.join(found)}. "
            f"If it is, add {keep} to {where}: its dashboards, folder and files stay where they are; if not "
            f"(another repository with the same clusters or uids), add `site_id: {fresh}`, a new id; nothing "
            "was written")


def settle(settings: Settings, seen: Sequence[Sighting], *, persist: bool, echo: Echo) -> Site:
    """The site with its id: the config's; else, when nothing was seen, a new one (written when `persist`)."""
    site, path = settings.site, settings.site_path
    if site.site_id:
        return site
    fresh = new_site_id(cluster_names(site.clusters))
    if seen:
        raise ConfigError(question(str(path), seen, legacy_site_id(site.clusters), fresh))
    if not persist:
        echo(f"site: no site_id in {path} yet: this run is site {fresh!r} and writes none (push, sync or "
             "provision writes one)")
        return site.identified(fresh)
    held = write_site_id(path, fresh)
    if held == fresh:
        echo(f"site: wrote `site_id: {held}` into {path}, this repository's identity in Grafana; commit it, so "
             "that every clone is this site")
    else:
        echo(f"site: {path} got `site_id: {held}` from another gpudash meanwhile; using it")
    return site.identified(held)


def _evidenced(remote: GrafanaRemote, found: RemoteDashboard) -> RemoteDashboard | None:
    """`found`, with its version history when its JSON has no marker; None when it was deleted meanwhile."""
    if found.provisioned or read_marker(found.dashboard) is not None:
        return found
    history = remote.history(found.uid, found.title)
    return None if history is None else replace(found, history=history)


def read_sightings(remote: GrafanaRemote, local: Sequence[dict[str, Any]], site: Site) -> list[Sighting]:
    """What Grafana holds at the local uids, and in the folder the old derived id would have used."""
    legacy = legacy_site_id(site.clusters)
    wanted = {str(d["uid"]): str(d["title"]) for d in local}
    at_local = [_evidenced(remote, found) for found in remote.dashboards(wanted).values()]
    folder = Target.from_site(site.grafana_folder_uid or f"gpudash-{legacy}"[:40], "", legacy).folder_uid
    in_folder = []
    for hit in remote.tagged(TAG):
        uid, title = str(hit.get("uid", "")), str(hit.get("title", ""))
        if uid and uid not in wanted and str(hit.get("folderUid") or "") == folder:
            listed = remote.dashboard(uid, title)
            in_folder.append(listed and _evidenced(remote, listed))
    return sightings([d for d in at_local if d], [d for d in in_folder if d], legacy)


def site_from_grafana(remote: GrafanaRemote, settings: Settings, local: Sequence[dict[str, Any]], *, persist: bool,
                      echo: Echo, seen: Sequence[Sighting] = ()) -> Site:
    """The site with its id, asking Grafana only when the config names none (`seen`: what else was found)."""
    if settings.site.site_id:
        return settings.site
    found = [*seen, *read_sightings(remote, local, settings.site)]
    return settle(settings, found, persist=persist, echo=echo)
