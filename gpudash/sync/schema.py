"""Which dashboard schema gpudash writes to a Grafana, and each dashboard in that schema.

gpudash.yaml's `grafana.schema`: `v1` (the classic JSON, every Grafana), `v2` (Grafana 13's dynamic
dashboards, on Grafanas that serve dashboard.grafana.app/v2) or `auto` (v2 on 13+ where v2 is served, v1
elsewhere). The classic JSON is the local files as they are; the v2 spec comes from a v1 -> v2 conversion:
the one a session passes (gpudash's own, `gpudash.schema_v2.resource.to_v2` with the site's metric profile,
as `gpudash dashboards` writes dashboards/v2), unless another is installed (`use_v2_converter`). Without
any, `auto` stays on v1 and `v2` is refused up front.

The schema a dashboard is compared in is the one Grafana stores it in (`Schema.spec_of`), never a spec
Grafana converted to answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpudash.errors import ConfigError

V2Converter = Callable[[dict[str, Any]], dict[str, Any]]  # a v1 dashboard -> its v2 resource (or bare spec)

_converter: list[V2Converter] = []  # gpudash's v1 -> v2 conversion, once one is installed


def use_v2_converter(converter: V2Converter | None) -> None:
    """Install (None: remove) the v1 -> v2 conversion that gives a dashboard's v2 spec: any function of a v1
    dashboard that answers its `dashboard.grafana.app/v2` resource (or the bare spec)."""
    _converter.clear()
    if converter is not None:
        _converter.append(converter)


def v2_converter() -> V2Converter | None:
    return _converter[0] if _converter else None


def family(version: str) -> str:
    """"v2" for dashboard.grafana.app's v2 versions, "v1" for the classic ones (v0alpha1, v1beta1, v1)."""
    return "v2" if version.startswith("v2") else "v1"


@dataclass(frozen=True)
class Schema:
    """The schema gpudash writes (`writes`: v1 or v2) and the conversion that gives a dashboard's v2 spec."""

    writes: str = "v1"
    converter: V2Converter | None = None

    def spec_of(self, local: dict[str, Any], version: str) -> dict[str, Any] | None:
        """The local dashboard's spec in `version`'s schema; None when gpudash cannot write that schema."""
        if family(version) == "v1":
            return local
        if self.converter is None:
            return None
        converted = self.converter(local)
        spec = converted.get("spec") if "elements" not in converted else converted
        return dict(spec) if isinstance(spec, dict) else None


CLASSIC = Schema()


def choose(setting: str, grafana_version: str, v2_served: bool, where: str = "grafana.schema",
           own: V2Converter | None = None) -> Schema:
    """The schema for this run: `setting` (v1 | v2 | auto) against what this Grafana serves; `own`: the
    v1 -> v2 conversion to use where none is installed."""
    converter = v2_converter() or own
    major = grafana_version.split(".")[0]
    if setting == "v1":
        return Schema("v1", converter)
    if setting == "v2":
        if not v2_served:
            raise ConfigError(f"{where}: v2, but Grafana {grafana_version} does not serve dashboard.grafana.app/v2; "
                              "set it to v1 or auto")
        if converter is None:
            raise ConfigError(f"{where}: v2, but this gpudash has no v1 -> v2 dashboard conversion; "
                              "set it to v1 or auto")
        return Schema("v2", converter)
    on_13 = major.isdigit() and int(major) >= 13
    return Schema("v2" if on_13 and v2_served and converter is not None else "v1", converter)
