"""What a message may show of a server: one line, its reason kept, no credentials in any spelling, however cut."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudash.redaction import FRAGMENT, MASK, NO_SECRETS, Secrets, snippet, split_userinfo

USER, PASSWORD, TOKEN = "admin", "s3cr&t-Pa55/w0rd:x9Q%z", "glsa_Kq3VzP9mX2wL7tR8yN4bC6dF1hJ5_a1b2c3d4"
SECRETS = Secrets.of(USER, PASSWORD, TOKEN)
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def _shows_secret(text: str) -> bool:
    """Whether `text` holds FRAGMENT characters in a row of the password, the token or the Basic value."""
    return any(secret[i:i + FRAGMENT] in text for secret in (PASSWORD, TOKEN, BASIC, quote(PASSWORD, safe=""))
               for i in range(len(secret) - FRAGMENT + 1))


def test_a_long_answer_keeps_its_start_and_the_reason_at_its_end() -> None:
    error = ("found duplicate series for the match group {cluster=\"e2e\"} on the right hand-side of the operation: "
             + "[" + ", ".join(f'{{gpu="{i}"}}' for i in range(200)) + "];\nmany-to-many matching not allowed")
    for cut in (snippet(error, 200), SECRETS.printable(error, 200), NO_SECRETS.printable(error, 200)):
        assert len(cut) == 200 and "\n" not in cut
        assert cut.startswith("found duplicate series for the match group")
        assert cut.endswith("many-to-many matching not allowed")
    assert snippet("short\nanswer") == "short answer" == SECRETS.printable("short\nanswer")


def test_credentials_leave_the_url_decoded() -> None:
    parts = split_userinfo("http://admin:p%40ss@prometheus:9090/prefix")
    assert (parts.url, parts.user, parts.password) == ("http://prometheus:9090/prefix", "admin", "p@ss")


@pytest.mark.parametrize("limit", [40, 80, 100, 120, 160, 200, 300, 400])
@pytest.mark.parametrize("shift", range(0, 48, 5))
def test_a_cut_never_leaves_part_of_a_secret(limit: int, shift: int) -> None:
    # What the cut used to split: secrets back to back, wherever the cut falls.
    echoed = "." * shift + " ".join([f"Basic {BASIC}", f"Bearer {TOKEN}", PASSWORD] * 30) + "." * shift
    shown = SECRETS.printable(echoed, limit)
    assert len(shown) <= limit
    assert not _shows_secret(shown), shown
    assert not _shows_secret(snippet(SECRETS.redact(echoed), limit))


@pytest.mark.parametrize("spelling", [
    PASSWORD, quote(PASSWORD, safe=""), quote(PASSWORD), quote_plus(PASSWORD), quote(PASSWORD, safe="").lower(),
    json.dumps(PASSWORD)[1:-1], PASSWORD.replace("/", "\\/"), "s3cr&amp;t-Pa55/w0rd:x9Q%z",
    BASIC, base64.urlsafe_b64encode(f"{USER}:{PASSWORD}".encode()).decode(), BASIC.replace("/", "\\/"),
    base64.b64encode(PASSWORD.encode()).decode(), TOKEN, f"Bearer {TOKEN}", TOKEN[:20], PASSWORD[5:13],
    base64.b64encode(f"Authorization: Basic {USER}:{PASSWORD}\r\nHost: x".encode()).decode(),
    base64.b64encode(f"token={TOKEN}".encode()).decode().rstrip("="),
], ids=["typed", "percent", "percent-keep-slash", "form", "percent-lower", "json", "json-slash", "html", "basic",
        "basic-urlsafe", "basic-json-slash", "base64-password", "token", "bearer", "token-start", "password-middle",
        "base64-of-headers", "base64-of-token-text"])
def test_every_spelling_a_server_could_echo_is_masked(spelling: str) -> None:
    shown = SECRETS.printable(f"HTTP 401: invalid credentials [{spelling}] for user {USER}", 400)
    assert MASK in shown and shown.startswith("HTTP 401: invalid credentials [")
    assert shown.endswith(f"] for user {USER}")
    assert not _shows_secret(shown)
    for run in shown.split():
        decoded = base64.b64decode(run + "=" * (-len(run) % 4)) if run.isalnum() and len(run) % 4 != 1 else b""
        assert PASSWORD.encode() not in decoded and TOKEN.encode() not in decoded


def test_a_text_without_secrets_is_left_alone() -> None:
    text = 'parse error: unexpected "}" in aggregation at char 42; Authorization: Basic ... admin'
    assert SECRETS.redact(text) == text
    assert Secrets.of("admin", "pw").redact("pw p@ss pwd") == "*** p@ss ***d"  # short: the whole spelling only


def test_secrets_of_two_connections_add_up() -> None:
    both = Secrets.of("a", "first-password") + Secrets.of("", "", "second-token-value")
    assert both.redact("first-password second-token-value") == f"{MASK} {MASK}"
    assert not NO_SECRETS and both


def test_only_the_ends_of_a_huge_answer_are_read() -> None:
    middle = "x " * 20_000_000  # 40 MB: split whole, this would be twenty million strings
    shown = SECRETS.printable(f"start {PASSWORD} {middle} reason {TOKEN} end", 120)
    assert shown.startswith(f"start {MASK} x x") and shown.endswith(f"x reason {MASK} end")
    assert len(shown) == 120
    spaces = SECRETS.printable(" " * 5_000_000 + f"only {TOKEN}" + "\n" * 5_000_000)
    assert spaces == f"only {MASK}"


def test_a_server_word_inside_a_password_is_masked_too() -> None:
    # Six characters of a password in a row are never shown, even when the server wrote them as a word of its own:
    # safe over readable.
    assert Secrets.of("admin", "not-the-password").printable("Invalid username or password") == \
        "Invalid username or ***"


_PIECES = [PASSWORD, TOKEN, BASIC, "Basic", "Bearer", "error:", "x", "...", "\n", "  ", "\t", "é", '"', "a" * 50,
           " " * 300, quote(PASSWORD, safe="")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=300).map(" ".join), st.sampled_from([40, 80, 200, 400]))
def test_reading_only_the_ends_shows_what_masking_it_all_then_cutting_would(text: str, limit: int) -> None:
    assert SECRETS.printable(text, limit) == snippet(SECRETS.redact(" ".join(text.split())), limit)
