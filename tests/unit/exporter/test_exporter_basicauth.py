"""Basic auth as exporter-toolkit does it: long passwords cut as Go's bcrypt cuts them, a dummy comparison
for unknown users, failures that refuse instead of raising, a cache only correct credentials enter."""

from __future__ import annotations

import pytest

from gpudash.exporter.basicauth import KEY_BYTES, BasicAuth, Bcrypt, bcrypt_backend, hash_problem

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


def test_an_unknown_user_costs_one_comparison_against_a_dummy_at_the_highest_cost() -> None:
    counting = Counting()
    auth = BasicAuth({"fast": _hash(b"a", cost=4), "slow": _hash(b"b", cost=5)}, counting.backend)
    assert auth.dummy_hash.startswith("$2b$05$")
    assert not auth.check(b"nobody", b"guess")
    assert counting.checked == [(b"guess", auth.dummy_hash)]
    assert not auth.check(b"fast", b"guess")  # a known user with a wrong password: one comparison too
    assert len(counting.checked) == 2 and counting.checked[1][1] != auth.dummy_hash


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
