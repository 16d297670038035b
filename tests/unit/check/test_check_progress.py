"""The progress line of a long run: quiet for a short one, then one line every EVERY_S seconds. No sleep."""

from __future__ import annotations

from gpudash.check.progress import EVERY_S, Progress


def test_quiet_while_short_then_a_line_every_interval() -> None:
    now, lines = [0.0], []
    progress = Progress("checked", "queries", 218, lines.append, clock=lambda: now[0])
    for _ in range(30):
        now[0] += EVERY_S / 40  # 30 queries in three quarters of the interval
        progress.tick()
    assert lines == []
    now[0] = EVERY_S + 2
    progress.tick(failed=True)
    assert lines == ["checked 31/218 queries, 1 failing, 12 s"]
    now[0] += EVERY_S - 1
    progress.tick(failed=True)
    assert len(lines) == 1  # the next one a whole interval after the last
    now[0] += 1
    progress.tick()
    assert lines[1:] == [f"checked 33/218 queries, 2 failing, {2 * EVERY_S + 2:.0f} s"]
