"""When a preview is a failure although pictures were drawn: every query failed. No server."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudash.preview.previewer import PreviewIncomplete, _every_query_failed
from gpudash.preview.series import PanelData, Series

ANSWERED = PanelData((), (), (("A", ()),))  # a query answered with no series: not a failure
REFUSED = PanelData((), ("query A: HTTP 422: bad_data",))
DRAWN = PanelData((Series("gpu 0", {}, (1.0,), (2.0,)),), (), (("A", ()),))


def test_every_query_refused_fails_naming_the_first_error() -> None:
    paths = [Path("previews/gpudash-node.png")]
    with pytest.raises(PreviewIncomplete) as caught:
        _every_query_failed([REFUSED, REFUSED], paths)
    assert caught.value.format_message() == ("every one of the 2 queries failed (each panel shows its error); the "
                                             "first: query A: HTTP 422: bad_data")
    assert caught.value.exit_code == 4 and caught.value.paths == paths


@pytest.mark.parametrize("answers", [[REFUSED, ANSWERED], [ANSWERED], [], [REFUSED, DRAWN]],
                         ids=["one-answered", "empty-answer", "no-queries", "series"])
def test_one_answer_or_no_query_at_all_is_no_failure(answers: list[PanelData]) -> None:
    _every_query_failed(answers, [])
