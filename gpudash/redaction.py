"""What a message may show of a server: its URL without credentials, its answer on one line, no secret.

`split_userinfo` takes `user:password@` out of a URL, giving the URL fit for any message and the user and
password decoded (urllib's `.username` and `.password` keep percent-escapes: `p%40ss` is the password
`p@ss`). `Secrets` holds what one connection sends (a password, a token) and finds them in a text in any
spelling a server could send back: as typed, percent-encoded, JSON- or HTML-escaped, base64 (the Basic-auth
value, or any base64 run that decodes to a text holding one), and any run of `FRAGMENT` characters of those
(a server that cut its own echo short). `Secrets.printable` is the one way a server's answer, or an exception
about it, enters a message: flattened to one line, its secrets masked, and only then cut short, so the cut
never leaves part of a secret behind. `snippet` cuts gpudash's own text (an expression, a name).
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus, unquote, urlsplit, urlunsplit

MASK = "***"
FRAGMENT = 6  # a run of this many characters of a secret is masked wherever it shows
SCAN_LIMIT = 131_072  # characters read from each end of an answer to find what a message keeps of it
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_PERCENT = re.compile(r"%[0-9A-F]{2}")


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


def _base64(raw: str) -> list[str]:
    data = raw.encode()
    return [base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()]


def _spellings(secret: str) -> set[str]:
    """`secret` as a server could send it back: typed, percent-encoded, escaped for JSON or HTML, base64."""
    forms = {secret, " ".join(secret.split()), html.escape(secret), json.dumps(secret)[1:-1],
             json.dumps(secret, ensure_ascii=False)[1:-1], *_base64(secret)}
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret)):
        forms |= {encoded, _PERCENT.sub(lambda m: m.group().lower(), encoded)}
    return forms | {form.replace("/", "\\/") for form in forms}  # JSON encoders that escape the slash


def _grams(text: str) -> set[str]:
    return {text[i:i + FRAGMENT] for i in range(len(text) - FRAGMENT + 1)}


def _any_of(pieces: set[str]) -> re.Pattern[bytes] | None:
    return re.compile(b"|".join(re.escape(piece.encode()) for piece in sorted(pieces))) if pieces else None


@dataclass(frozen=True)
class Secrets:
    """What one connection sends, spelled every way a server could echo it; `+` joins two connections'."""

    grams: frozenset[str] = field(default=frozenset(), repr=False)  # every FRAGMENT-long run of every spelling
    short: tuple[str, ...] = field(default=(), repr=False)  # spellings shorter than FRAGMENT, longest first
    hidden: re.Pattern[bytes] | None = field(default=None, repr=False)  # what no base64 run may decode to hold
    reach: int = 0  # the longest spelling: how far a cut can reach into one

    @classmethod
    def of(cls, user: str = "", password: str = "", *tokens: str) -> Secrets:
        """The password and tokens in every spelling, and the Basic-auth value of `user` and `password`."""
        values = [value for value in (password, *tokens) if value]
        forms = {form for value in values for form in _spellings(value)}
        if password:
            basic = _base64(f"{user}:{password}")  # the Basic-auth value
            forms |= {*basic, *(value.replace("/", "\\/") for value in basic)}
        grams = frozenset(gram for form in forms for gram in _grams(form))
        short = tuple(sorted((form for form in forms if len(form) < FRAGMENT), key=len, reverse=True))
        return cls(grams, short, _any_of({piece for value in values for piece in (_grams(value) or {value})}),
                   max(map(len, forms), default=0))

    def __add__(self, other: Secrets) -> Secrets:
        hidden = [pattern.pattern for pattern in (self.hidden, other.hidden) if pattern is not None]
        return Secrets(self.grams | other.grams, tuple(sorted({*self.short, *other.short}, key=len, reverse=True)),
                       re.compile(b"|".join(hidden)) if hidden else None, max(self.reach, other.reach))

    def __bool__(self) -> bool:
        return bool(self.grams or self.short)

    def redact(self, text: str) -> str:
        """`text` with every spelling of a secret, and every run of FRAGMENT characters of one, as MASK."""
        if not self:
            return text
        masked = bytearray(len(text))
        for start in range(len(text) - FRAGMENT + 1):
            if text[start:start + FRAGMENT] in self.grams:
                masked[start:start + FRAGMENT] = b"\1" * FRAGMENT
        for form in self.short:
            at = text.find(form)
            while at >= 0:
                masked[at:at + len(form)] = b"\1" * len(form)
                at = text.find(form, at + 1)
        if self.hidden is not None:
            for run in _BASE64_RUN.finditer(text):
                if self._decodes_to_secret(run.group(), self.hidden):
                    masked[run.start():run.end()] = b"\1" * (run.end() - run.start())
        return _masked(text, masked)

    @staticmethod
    def _decodes_to_secret(run: str, hidden: re.Pattern[bytes]) -> bool:
        """Whether `run`, read as base64 from any of its first four characters, holds a piece of a secret."""
        alphabet = b"-_" if "-" in run or "_" in run else None  # URL-safe base64
        for start in range(4):
            piece = run[start:].rstrip("=")
            piece = piece[:-1] if len(piece) % 4 == 1 else piece
            try:
                decoded = base64.b64decode(piece + "=" * (-len(piece) % 4), altchars=alphabet)
            except (binascii.Error, ValueError):
                continue
            if hidden.search(decoded):
                return True
        return False

    def printable(self, text: str, limit: int = 200) -> str:
        """A server's answer (or an exception's text) as one line of at most `limit` characters, no secret in it.

        Masked first, cut after: a long answer keeps its start and its end (servers put the reason last), and
        only as much of each end is read as the message can keep.
        """
        tail = (limit - 1) // 3
        head, whole = self._masked_end(text, limit + 1, from_end=False)
        if whole:
            return head if len(head) <= limit else head[: limit - 1 - tail] + "…" + head[len(head) - tail:]
        end, _ = self._masked_end(text, tail, from_end=True)
        return head[: limit - 1 - tail] + "…" + end[len(end) - tail:]

    def _masked_end(self, text: str, need: int, from_end: bool) -> tuple[str, bool]:
        """At least `need` characters (where the text has them) of one end of `text`, flattened and masked, none of
        them changed by where the text was cut; and whether that is the whole text."""
        size = 2 * (need + self.reach)
        while True:
            piece, whole = _flat_end(text, size, from_end)
            shown = self.redact(piece)
            if whole:
                return shown, True
            margin = self.reach + FRAGMENT  # what the cut may have changed: drop it
            safe = shown[margin:] if from_end else shown[: max(0, len(shown) - margin)]
            if len(safe) >= need or size >= SCAN_LIMIT:
                return safe, False
            size *= 4


def _flat_end(text: str, size: int, from_end: bool) -> tuple[str, bool]:
    """The first (or last) `size` characters of `text` with its whitespace runs as single spaces, and whether that
    is all of it. Splits off only as many words as it needs, however long the text."""
    words = text.rsplit(maxsplit=size) if from_end else text.split(maxsplit=size)
    every = len(words) <= size
    flat = " ".join(words if every else (words[1:] if from_end else words[:-1]))
    if every and len(flat) <= size:
        return flat, True
    return (flat[len(flat) - size:] if from_end else flat[:size]), False


def _masked(text: str, masked: bytearray) -> str:
    """`text` with each run of masked characters as one MASK."""
    out: list[str] = []
    at = 0
    while at < len(text):
        if masked[at]:
            end = masked.find(b"\0", at)
            end = len(text) if end < 0 else end
            out.append(MASK)
        else:
            end = masked.find(b"\1", at)
            end = len(text) if end < 0 else end
            out.append(text[at:end])
        at = end
    return "".join(out)


NO_SECRETS = Secrets()


def redact(text: str, secrets: Secrets) -> str:
    return secrets.redact(text)


def snippet(text: str, limit: int = 200) -> str:
    """gpudash's own text (an expression, a name) as one line of at most `limit` characters.

    A long one keeps its start and its end: servers put the reason last ("...: many-to-many matching not
    allowed"), and the series or body dumped in the middle is what can go. A server's answer goes through
    `Secrets.printable` instead, which masks its secrets before cutting.
    """
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    tail = (limit - 1) // 3
    return flat[: limit - 1 - tail] + "…" + flat[len(flat) - tail:]
