"""Basic auth as exporter-toolkit does it: long passwords cut as Go's bcrypt cuts them, a dummy comparison
for unknown users, failures that refuse instead of raising, a cache only correct credentials enter."""

from __future__ import annotations

import threading

import pytest
from support.waiting import eventually

from gpudash.exporter.basicauth import (
    KEY_BYTES,
    AuthBusy,
    BasicAuth,
    Bcrypt,
    bcrypt_backend,
    hash_cost,
    hash_problem,
)

REAL = bcrypt_backend()
pytestmark = pytest.mark.skipif(REAL is None, reason="neither the bcrypt package nor crypt(3) bcrypt")


class Counting:
    """The real bcrypt, remembering each (password, hash) it was asked to compare."""

    def __init__(self) -> None:
        assert REAL is not None
        self.real = REAL
        self.checked: list[tuple[bytes, str]] = []
        self.backend = Bcrypt(check=self._check, make=REAL.make)

    def _check(self, password: bytes, hashed: str) -> bool:
        self.checked.append((password, hashed))
        return self.real.check(password, hashed)


def _hash(password: bytes, cost: int = 4) -> str:
    assert REAL is not None
    return REAL.make(password, cost)


def test_a_password_over_72_bytes_is_cut_as_gos_bcrypt_cuts_it() -> None:
    # Go's CompareHashAndPassword reads 72 bytes of the key and ignores the rest; bcrypt >= 4.1 raised instead
    counting = Counting()
    auth = BasicAuth({"prometheus": _hash(b"k" * 72)}, counting.backend)
    assert auth.check(b"prometheus", b"k" * 72 + b" and whatever follows")
    assert not auth.check(b"prometheus", b"x" * 100_000)
    assert all(len(password) <= KEY_BYTES for password, _ in counting.checked)


def test_any_failure_inside_bcrypt_is_a_refusal() -> None:
    def broken(password: bytes, hashed: str) -> bool:
        raise ValueError("Invalid salt")

    assert REAL is not None
    auth = BasicAuth({"prometheus": _hash(b"s3cret")}, Bcrypt(check=broken, make=REAL.make))
    assert auth.check(b"prometheus", b"s3cret") is False


def _rounds(checked: list[tuple[bytes, str]]) -> int:
    """The bcrypt work of these comparisons: 2^cost rounds each."""
    return sum(2 ** (hash_cost(hashed) or 0) for _, hashed in checked)


def test_every_failed_check_does_the_work_of_one_at_the_highest_cost_whoever_it_names() -> None:
    # a wrong password took 80 ms for a cost-10 user, 296 ms for a cost-12 one and 305 ms for an unknown user
    counting = Counting()
    auth = BasicAuth({"cheap": _hash(b"a", cost=4), "middle": _hash(b"b", cost=5), "dear": _hash(b"c", cost=7)},
                     counting.backend)
    assert auth.dummy_hash.startswith("$2b$07$")
    work = {}
    for user in (b"nobody", b"cheap", b"middle", b"dear", b"cheap\0"):
        counting.checked.clear()
        assert not auth.check(user, b"guess")
        work[user] = _rounds(counting.checked)
        assert counting.checked[0][1] == auth.work_for(user)[0]
    assert set(work.values()) == {2**7}, work
    counting.checked.clear()
    assert auth.check(b"cheap", b"a")  # a right password answers after its own hash: no one learns from that
    assert _rounds(counting.checked) == 2**4


def test_a_flood_is_refused_at_once_past_its_share_and_never_holds_up_a_verified_scraper() -> None:
    # one lock for every bcrypt check once made a scrape wait 9.3 s behind 30 threads of guesses
    assert REAL is not None
    entered, release = threading.Semaphore(0), threading.Event()

    def stuck(password: bytes, hashed: str) -> bool:
        entered.release()
        release.wait(60)
        return REAL.check(password, hashed)

    auth = BasicAuth({"prometheus": _hash(b"s3cret"), "replica": _hash(b"other")}, Bcrypt(check=stuck, make=REAL.make),
                     at_once=2, waiting=2, per_client=2)
    release.set()
    assert auth.check(b"prometheus", b"s3cret", client="10.0.0.9")  # verified once: remembered
    assert entered.acquire(timeout=30)
    release.clear()
    outcome: dict[str, object] = {}

    def attempt(name: str, client: str, password: bytes, user: bytes = b"prometheus") -> threading.Thread:
        def run() -> None:
            try:
                outcome[name] = auth.check(user, password, client=client)
            except AuthBusy as exc:
                outcome[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    flood = [attempt(f"guess {n}", "10.6.6.6", b"guess") for n in range(2)]
    for _ in flood:
        assert entered.acquire(timeout=30)  # both running, both stuck
    late = [attempt("third guess", "10.6.6.6", b"guess"), attempt("verified", "10.0.0.9", b"s3cret")]
    for thread in late:
        thread.join(30)  # only a safety net: neither waits for the stuck guesses
        assert not thread.is_alive()
    assert isinstance(outcome["third guess"], AuthBusy) and outcome["verified"] is True
    # another address still finds a place, and waits only for the checks running
    first_time = attempt("another scraper", "10.0.0.10", b"other", b"replica")
    other = [attempt("guess from elsewhere", "10.7.7.7", b"guess")]
    eventually(lambda: auth.checks_in_progress == 4, timeout=30, what="two running and two waiting")
    refused = attempt("one too many", "10.8.8.8", b"guess")
    refused.join(30)
    assert isinstance(outcome["one too many"], AuthBusy)
    release.set()
    for thread in [*flood, first_time, *other]:
        thread.join(30)
    assert outcome["another scraper"] is True and outcome["guess 0"] is False
    assert auth.checks_in_progress == 0


def test_only_correct_credentials_are_remembered() -> None:
    counting = Counting()
    auth = BasicAuth({"prometheus": _hash(b"s3cret")}, counting.backend)
    assert auth.check(b"prometheus", b"s3cret") and auth.check(b"prometheus", b"s3cret")
    assert len(counting.checked) == 1  # the second scrape did not pay for bcrypt
    assert not auth.check(b"prometheus", b"guess") and not auth.check(b"prometheus", b"guess")
    assert len(counting.checked) == 3  # a guess is never remembered, so it never answers fast


def test_the_remembered_digest_keeps_user_and_password_apart() -> None:
    # user "a\0b" with password "c" and user "a" with password "b\0c" once made the same digest
    auth = BasicAuth({"a\0b": _hash(b"c")}, Counting().backend)
    assert auth.check(b"a\0b", b"c")
    assert not auth.check(b"a", b"b\0c")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("hunter2", "expected a bcrypt hash"),
        (123, "expected a bcrypt hash"),
        (None, "expected a bcrypt hash"),
        ("$2b$03$" + "a" * 53, "bcrypt cost 3 is outside 4..31"),
        ("$2b$10$" + "a" * 53 + "\n", "expected a bcrypt hash"),
    ],
)
def test_hash_problems_never_quote_the_value(value: object, problem: str) -> None:
    found = hash_problem(value)
    assert found is not None and found.startswith(problem) and "hunter2" not in found
