"""What a message may show of a server: its URL without credentials, its answer on one line, no secret.

`split_userinfo` takes `user:password@` out of a URL, giving the URL fit for any message and the user and
password decoded (urllib's `.username` and `.password` keep percent-escapes: `p%40ss` is the password
`p@ss`). `secret_forms` lists every spelling of a secret a message could carry, `redact` blanks those out,
and `snippet` flattens a server's answer to one short line.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "***"


@dataclass(frozen=True)
class UrlCredentials:
    url: str  # the URL without userinfo: safe to print
    user: str = ""
    password: str = field(default="", repr=False)


def split_userinfo(url: str) -> UrlCredentials:
    """`url` without `user:password@`, and the user and password it carried, percent-decoded."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return UrlCredentials(url)
    shown = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return UrlCredentials(shown, unquote(parts.username or ""), unquote(parts.password or ""))


def secret_forms(user: str, password: str, *tokens: str) -> tuple[str, ...]:
    """The password as typed and percent-encoded, the Basic-auth header value, and any tokens."""
    forms = [*tokens, password, quote(password, safe="")]
    if user or password:
        forms.append(base64.b64encode(f"{user}:{password}".encode()).decode())
    # Longest first, so a short secret inside a longer one does not leave part of the longer one behind.
    return tuple(sorted({form for form in forms if form}, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def snippet(text: str, limit: int = 200) -> str:
    """A server's answer as one line of at most `limit` characters, for a message.

    A long one keeps its start and its end: servers put the reason last ("...: many-to-many matching not
    allowed"), and the series or body dumped in the middle is what can go.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    tail = (limit - 1) // 3
    return flat[: limit - 1 - tail] + "…" + flat[len(flat) - tail:]
