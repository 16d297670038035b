"""Drawing previews end to end: choose variables, ask Prometheus, draw, write every PNG at once.

matplotlib is an optional extra (`pip install 'gpudash[preview]'`), imported only here and only when a
picture is drawn, so every other command works without it and a missing one is one line saying what to
install.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gpudash.check.prometheus_api import PrometheusClient, TimeRange
from gpudash.errors import ConfigError, UsageError
from gpudash.files import write_owned
from gpudash.preview.fetch import fetch_panel, label_values
from gpudash.preview.panel_queries import builtins, choose_variables, panel_queries, window
from gpudash.preview.pixels import canvas_size, place
from gpudash.preview.series import PanelData

INSTALL_HINT = "pip install 'gpudash[preview]'"


class MissingExtra(UsageError):
    """matplotlib (the preview extra) is not installed."""


def drawing() -> ModuleType:
    """gpudash.preview.draw, or MissingExtra naming what to install."""
    try:
        return importlib.import_module("gpudash.preview.draw")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in ("matplotlib", "numpy", "PIL"):
            raise MissingExtra(f"previews need matplotlib, which is not installed: {INSTALL_HINT}") from None
        raise


@dataclass(frozen=True)
class Dashboards:
    """Dashboards by uid, in the order they were read."""

    by_uid: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, dashboards: Sequence[dict[str, Any]]) -> Dashboards:
        return cls({str(d.get("uid") or d.get("title") or f"dashboard-{i}"): d for i, d in enumerate(dashboards)})

    def only(self, uids: Sequence[str], *others: Dashboards) -> list[str]:
        """The uids to draw: `uids` (each must exist here or in `others`), else every uid of all."""
        known = [*self.by_uid, *(u for o in others for u in o.by_uid if u not in self.by_uid)]
        unknown = [u for u in uids if u not in known]
        if unknown:
            raise ConfigError(f"--dashboard {unknown[0]}: no such dashboard uid (known: {', '.join(known)})")
        return [u for u in known if not uids or u in uids]


class Previewer:
    """Draws dashboards against one Prometheus, all on one time window (`span`)."""

    def __init__(self, client: PrometheusClient, range_s: int, scrape_interval_s: int,
                 variables: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.range_s, self.scrape_interval_s = range_s, scrape_interval_s
        self.variables = dict(variables or {})
        self.span: TimeRange = window(client.now(), range_s, scrape_interval_s)
        self.draw = drawing()

    def panel_data(self, dashboard: dict[str, Any]) -> dict[int, PanelData]:
        filled = builtins(self.range_s, self.scrape_interval_s)
        values = choose_variables(dashboard, label_values(self.client, self.span), self.variables, filled)
        values.update(filled)
        return {index: fetch_panel(self.client, panel_queries(placed.panel, values), self.span)
                for index, placed in enumerate(place(dashboard))}

    def picture(self, dashboard: dict[str, Any], note: str = "") -> Any:
        return self.draw.draw_dashboard(dashboard, self.panel_data(dashboard), self.span, note)

    def compared(self, before: dict[str, Any] | None, after: dict[str, Any] | None, ref: str) -> Any:
        """Before | after, side by side; a side without the dashboard says so at the other's size."""
        sides = []
        for dashboard, other, note in ((before, after, f"before: {ref}"), (after, before, "after: working tree")):
            if dashboard is not None:
                sides.append(self.picture(dashboard, note))
            else:
                assert other is not None
                width, height = canvas_size(other)
                sides.append(self.draw.blank(width, height, f"not in {note.split(': ', 1)[1]}"))
        return self.draw.side_by_side(sides[0], sides[1])

    def png(self, pixels: Any) -> bytes:
        return bytes(self.draw.png_bytes(pixels))


def write_previews(out: Path, pictures: Mapping[str, bytes]) -> list[Path]:
    """Write every PNG or none, recorded in the folder's record of gpudash's files (gpudash.files.write_owned):
    OutputError, nothing written, where a same-named PNG is someone else's. Pictures of dashboards not drawn
    this time stay (a run may draw one dashboard). Return every picture's path, written or unchanged."""
    write_owned(out, pictures, "*.png", prune=False)
    return [out / name for name in pictures]


def draw_previews(prometheus_url: str, out: Path, after: Dashboards, uids: Sequence[str], range_s: int,
                  scrape_interval_s: int, variables: Mapping[str, str] | None = None,
                  before: Dashboards | None = None, ref: str | None = None,
                  progress: Callable[[str], None] = lambda line: None) -> list[Path]:
    """Draw the chosen dashboards (with `ref`, before | after) and write them all; return their paths.

    matplotlib is looked for first, so a missing extra is said before any server is asked anything.
    """
    drawing()
    chosen = after.only(uids, *([before] if before is not None else []))
    client = PrometheusClient(prometheus_url)
    try:
        client.probe()
        previewer = Previewer(client, range_s, scrape_interval_s, variables)
        pictures: dict[str, bytes] = {}
        for uid in chosen:
            started = time.monotonic()
            if ref is not None and before is not None:
                pixels = previewer.compared(before.by_uid.get(uid), after.by_uid.get(uid), ref)
                name = f"{uid}.compare.png"
            else:
                pixels = previewer.picture(after.by_uid[uid])
                name = f"{uid}.png"
            pictures[name] = previewer.png(pixels)
            progress(f"drew {uid} ({time.monotonic() - started:.1f} s)")
    finally:
        client.close()
    return write_previews(out, pictures)
