"""Drawing previews end to end: choose variables, ask Prometheus, draw, write every PNG at once.

matplotlib is an optional extra (`pip install 'gpudash[preview]'`), imported only here and only when a
picture is drawn, so every other command works without it and a missing one is one line saying what to
install.

A run may have a deadline: once it passes, the dashboard being drawn is dropped, those drawn before it are
written, and `PreviewIncomplete` names what was not drawn. It is raised too when every query failed (the
pictures, each panel showing its error, are written first): a set of pictures that shows nothing but errors is
no success.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gpudash.check.progress import Progress
from gpudash.check.prometheus_api import PrometheusClient, TimeRange
from gpudash.deadline import Deadline, DeadlineExceeded
from gpudash.errors import ConfigError, RemoteError, UsageError
from gpudash.files import write_owned
from gpudash.preview.fetch import fetch_panel, label_values
from gpudash.preview.panel_queries import builtins, choose_variables, panel_queries, window
from gpudash.preview.pixels import canvas_size, place
from gpudash.preview.series import PanelData

INSTALL_HINT = "pip install 'gpudash[preview]'"


class MissingExtra(UsageError):
    """matplotlib (the preview extra) is not installed."""


class PreviewIncomplete(RemoteError):
    """The deadline passed before every picture was drawn, or every query failed; `paths`: what was written."""

    def __init__(self, message: str, paths: list[Path]) -> None:
        super().__init__(message)
        self.paths = paths


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
    """Draws dashboards against one Prometheus, all on one time window (`span`), until `client.deadline` passes.

    `answers` collects what each panel got (its series, and an error per query that failed); `progress` counts
    the panels.
    """

    def __init__(self, client: PrometheusClient, range_s: int, scrape_interval_s: int,
                 variables: Mapping[str, str] | None = None, progress: Progress | None = None) -> None:
        self.client = client
        self.range_s, self.scrape_interval_s = range_s, scrape_interval_s
        self.variables = dict(variables or {})
        self.span: TimeRange = window(client.now(), range_s, scrape_interval_s)
        self.draw = drawing()
        self.progress = progress
        self.answers: list[PanelData] = []

    def panel_data(self, dashboard: dict[str, Any]) -> dict[int, PanelData]:
        """Each panel's data; DeadlineExceeded once the run's deadline has passed (the picture would be partial)."""
        filled = builtins(self.range_s, self.scrape_interval_s)
        values = choose_variables(dashboard, label_values(self.client, self.span), self.variables, filled)
        values.update(filled)
        found: dict[int, PanelData] = {}
        for index, placed in enumerate(place(dashboard)):
            if self.client.deadline.passed:
                raise DeadlineExceeded(self.client.deadline.seconds)
            found[index] = data = fetch_panel(self.client, panel_queries(placed.panel, values), self.span)
            self.answers.append(data)
            if self.progress is not None:
                self.progress.tick(bool(data.errors))
        if self.client.deadline.passed:
            raise DeadlineExceeded(self.client.deadline.seconds)
        return found

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


def _panel_count(uid: str, after: Dashboards, before: Dashboards | None) -> int:
    return sum(len(place(side.by_uid[uid])) for side in (after, before) if side is not None and uid in side.by_uid)


def draw_previews(prometheus_url: str, out: Path, after: Dashboards, uids: Sequence[str], range_s: int,
                  scrape_interval_s: int, variables: Mapping[str, str] | None = None,
                  before: Dashboards | None = None, ref: str | None = None,
                  progress: Callable[[str], None] = lambda line: None,
                  deadline: Deadline | None = None) -> list[Path]:
    """Draw the chosen dashboards (with `ref`, before | after) and write them all; return their paths.

    matplotlib is looked for first, so a missing extra is said before any server is asked anything. `progress`
    gets a line per dashboard drawn, and one on how many panels are done every so often (check.progress).
    """
    drawing()
    chosen = after.only(uids, *([before] if before is not None else []))
    client = PrometheusClient(prometheus_url, deadline=deadline)
    counted = Progress("queried", "panels", sum(_panel_count(uid, after, before) for uid in chosen), progress)
    pictures: dict[str, bytes] = {}
    drawn: list[str] = []
    answers: list[PanelData] = []
    try:
        client.probe()
        previewer = Previewer(client, range_s, scrape_interval_s, variables, counted)
        for uid in chosen:
            started = time.monotonic()
            previewer.answers = []
            try:
                if ref is not None and before is not None:
                    pixels = previewer.compared(before.by_uid.get(uid), after.by_uid.get(uid), ref)
                    name = f"{uid}.compare.png"
                else:
                    pixels = previewer.picture(after.by_uid[uid])
                    name = f"{uid}.png"
            except DeadlineExceeded:
                break
            pictures[name] = previewer.png(pixels)
            drawn.append(uid)
            answers += previewer.answers
            progress(f"drew {uid} ({time.monotonic() - started:.1f} s)")
    finally:
        client.close()
    paths = write_previews(out, pictures)
    if len(drawn) < len(chosen):
        raise PreviewIncomplete(f"the preview's deadline ({client.deadline.seconds:g} s) passed: drew "
                                f"{', '.join(drawn) or 'nothing'}; not drawn: {', '.join(chosen[len(drawn):])}", paths)
    _every_query_failed(answers, paths)
    return paths


def _every_query_failed(answers: Sequence[PanelData], paths: list[Path]) -> None:
    """PreviewIncomplete when queries were sent and not one of them was answered."""
    errors = [error for data in answers for error in data.errors]
    if errors and not any(data.frames for data in answers):
        raise PreviewIncomplete(f"every one of the {len(errors)} queries failed (each panel shows its error); the "
                                f"first: {errors[0]}", paths)
