"""Alertmanager receivers as the site config names them (`receivers:`, `rma_receivers:` and the receivers of
the alerting sections): kind, options, and where their secrets are read from, never the secrets themselves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpudash.config.fields import FieldReader


@dataclass(frozen=True)
class Receiver:
    """An Alertmanager receiver. Secrets are named by file or environment variable, never held as text."""

    name: str
    kind: str  # webhook | slack | email
    options: tuple[tuple[str, str], ...]

    def option(self, key: str, default: str = "") -> str:
        return dict(self.options).get(key, default)


_Check = Callable[[FieldReader, str], str]
# Each receiver's options and how each is read: a secret is named by a file or an environment variable.
_RECEIVER_OPTIONS: dict[str, dict[str, _Check]] = {
    "webhook": {"url": FieldReader.url, "url_file": FieldReader.string, "url_env": FieldReader.env_name},
    "slack": {"api_url_file": FieldReader.string, "api_url_env": FieldReader.env_name, "channel": FieldReader.string},
    "email": {"to": FieldReader.string, "from": FieldReader.string, "smarthost": FieldReader.host_port,
              "auth_username": FieldReader.string, "auth_password_file": FieldReader.string,
              "auth_password_env": FieldReader.env_name},
}


def unique(reader: FieldReader, key: str, value: str, seen: dict[str, str], what: str) -> None:
    """Fail when `value` was given before (two routes, two scrapes or two receivers for one thing)."""
    if value in seen:
        reader.fail(f"{what} {value!r} is given twice (first at {seen[value]})", key)
    seen[value] = reader.where(key)


def _receiver_problem(kind: str, given: set[str]) -> str | None:
    """What a receiver of this kind lacks to be written out, or None."""
    if kind == "webhook" and not {"url", "url_file", "url_env"} & given:
        return "a webhook receiver needs url, url_file or url_env"
    if kind == "slack" and not {"api_url_file", "api_url_env"} & given:
        return "a slack receiver needs api_url_file or api_url_env (the webhook URL is a secret)"
    missing = [k for k in ("to", "from", "smarthost") if k not in given] if kind == "email" else []
    return f"an email receiver needs {', '.join(missing)}" if missing else None


def parse_receivers(top: FieldReader, key: str = "receivers") -> tuple[Receiver, ...]:
    """The list under `key` (absent: none), each receiver checked for what its kind needs."""
    receivers: list[Receiver] = []
    names: dict[str, str] = {}
    for _, r in top.items(key):
        kind = r.string("type", choices=tuple(_RECEIVER_OPTIONS))
        name = r.string("name")
        unique(r, "name", name, names, "receiver")
        options = tuple((key, read(r, key)) for key, read in _RECEIVER_OPTIONS[kind].items() if r.has(key))
        r.used.update(_RECEIVER_OPTIONS[kind])  # so a misspelt option's message lists them all
        problem = _receiver_problem(kind, {k for k, _ in options})
        if problem:
            r.fail(problem)
        r.done()
        receivers.append(Receiver(name, kind, options))
    return tuple(receivers)
