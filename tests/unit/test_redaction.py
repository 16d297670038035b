"""What a message may show of a server: one line, its reason kept, no credentials."""

from __future__ import annotations

from gpudash.redaction import snippet, split_userinfo


def test_a_long_answer_keeps_its_start_and_the_reason_at_its_end() -> None:
    error = ("found duplicate series for the match group {cluster=\"e2e\"} on the right hand-side of the operation: "
             + "[" + ", ".join(f'{{gpu="{i}"}}' for i in range(200)) + "];\nmany-to-many matching not allowed")
    shown = snippet(error, 200)
    assert len(shown) == 200 and "\n" not in shown
    assert shown.startswith("found duplicate series for the match group")
    assert shown.endswith("many-to-many matching not allowed")
    assert snippet("short\nanswer") == "short answer"


def test_credentials_leave_the_url_decoded() -> None:
    parts = split_userinfo("http://admin:p%40ss@prometheus:9090/prefix")
    assert (parts.url, parts.user, parts.password) == ("http://prometheus:9090/prefix", "admin", "p@ss")
