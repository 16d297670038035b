"""Basic auth as Prometheus exporter-toolkit does it (web/handler.go): bcrypt, the same work for every guess.

A failed check costs the same bcrypt work whoever it names: an unknown user is compared against a dummy hash
of the highest cost configured, and a wrong password for a user whose hash is cheaper is followed by dummy
comparisons at that cost, the next, and so on up to the highest (2^c + 2^c + ... + 2^(max-1) = 2^max rounds),
so neither the answer time nor its spread under load tells which users exist. A correct password is
remembered as a SHA-256 digest, so a scrape every few seconds does not pay bcrypt's deliberate slowness each
time; only correct credentials enter that cache, so guesses cannot push the scraper's entry out, and looking
there waits on no bcrypt. At most ``BCRYPT_AT_ONCE`` checks run at once and as many again wait, and one client
address may hold at most ``BCRYPT_AT_ONCE`` of those places; any further attempt is refused at once
(`AuthBusy`, answered 503), before looking at the user it names. So a flood of guesses neither queues without
end nor delays a scraper whose credentials were verified once, and a flood from one address leaves room for
another address's first check (it waits for at most the checks running).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import logging
import os
import re
import secrets
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpudash.exporter.episodes import Episode

log = logging.getLogger("gpudash.exporter")

HASH = re.compile(r"\$2[aby]?\$(?P<cost>[0-9][0-9])\$[./A-Za-z0-9]{53}")
MIN_COST, MAX_COST = 4, 31  # the range Go's bcrypt accepts (checkCost)
# Go's bcrypt.CompareHashAndPassword, which exporter-toolkit calls, never refuses a long password: only
# GenerateFromPassword returns ErrPasswordTooLong. Blowfish's ExpandKey reads 18 words (72 bytes) of the key
# cyclically, so bytes past the 72nd are ignored (golang.org/x/crypto bcrypt/bcrypt.go and blowfish/block.go;
# golang/go#36546). Python's bcrypt >= 4.1 raises ValueError instead, so the password is cut here to match.
KEY_BYTES = 72
_CACHE_LIMIT = 256
BCRYPT_AT_ONCE = max(1, min(4, len(os.sched_getaffinity(0))))  # checks running at once: a flood uses at most 4 cores
BCRYPT_WAITING = BCRYPT_AT_ONCE  # checks that may wait for one of those; more are refused at once
BCRYPT_PER_CLIENT = BCRYPT_AT_ONCE  # of those running or waiting, the most one client address may hold


class AuthBusy(Exception):
    """Too many checks are running or waiting: refused before looking at who asks (answered 503)."""


@dataclass(frozen=True)
class Bcrypt:
    """The two bcrypt operations basic auth needs, from the bcrypt package or the C library's crypt(3)."""

    check: Callable[[bytes, str], bool]  # (password of at most 72 bytes, hash) -> whether they match
    make: Callable[[bytes, int], str]  # (password, cost) -> a new hash with a random salt


def bcrypt_backend() -> Bcrypt | None:
    """The bcrypt package when installed, else crypt(3) where it knows bcrypt (glibc with libxcrypt); else None."""
    try:
        bcrypt: Any = importlib.import_module("bcrypt")
    except ImportError:
        return _crypt_backend()
    return Bcrypt(
        check=lambda password, hashed: bool(bcrypt.checkpw(password, hashed.encode())),
        make=lambda password, cost: str(bcrypt.hashpw(password, bcrypt.gensalt(cost)).decode()),
    )


def _crypt_backend() -> Bcrypt | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            crypt: Any = importlib.import_module("crypt")
    except ImportError:
        return None
    probe = crypt.crypt("probe", "$2b$04$" + "a" * 22)
    if not probe or not probe.startswith("$2b$04$"):
        return None

    def check(password: bytes, hashed: str) -> bool:
        # crypt(3) takes text: a password that is not UTF-8, or holds a NUL, raises and so does not match
        return hmac.compare_digest(crypt.crypt(password.decode(), hashed) or "", hashed)

    def make(password: bytes, cost: int) -> str:
        return str(crypt.crypt(password.decode(), crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << cost)))

    return Bcrypt(check=check, make=make)


def hash_cost(hashed: str) -> int | None:
    """The cost of a well-formed bcrypt hash, or None when the text is not one."""
    match = HASH.fullmatch(hashed)
    return int(match.group("cost")) if match else None


def hash_problem(hashed: object) -> str | None:
    """What keeps ``hashed`` from being a bcrypt hash Go's bcrypt accepts, or None; never quotes the value."""
    cost = hash_cost(hashed) if isinstance(hashed, str) else None
    if cost is None:
        return "expected a bcrypt hash ($2y$...)"
    if not MIN_COST <= cost <= MAX_COST:
        return f"bcrypt cost {cost} is outside {MIN_COST}..{MAX_COST}"
    return None


def hash_is_readable(backend: Bcrypt, hashed: str) -> bool:
    """Whether bcrypt can decode this hash (salt and digest), tried at the cheapest cost so loading stays fast."""
    try:
        backend.check(b"", re.sub(r"\$[0-9][0-9]\$", f"${MIN_COST:02d}$", hashed, count=1))
    except Exception:  # whatever the backend raises, the hash is unusable
        return False
    return True


class BasicAuth:
    """Users and their bcrypt hashes; ``check`` does the same bcrypt work whether the user exists or not."""

    def __init__(self, users: dict[str, str], backend: Bcrypt, *, at_once: int = BCRYPT_AT_ONCE,
                 waiting: int = BCRYPT_WAITING, per_client: int = BCRYPT_PER_CLIENT) -> None:
        self._users = {user.encode("utf-8", "surrogatepass"): hashed for user, hashed in users.items()}
        self._backend = backend
        costs = [hash_cost(hashed) or MIN_COST for hashed in users.values()] or [MIN_COST]
        self.max_cost = max(costs)
        # made once, with random passwords: the dummy of the highest cost for unknown users, and one hash per
        # cost from the cheapest configured up to the highest, to bring a cheaper user's failure up to it
        self.dummy_hash = backend.make(secrets.token_urlsafe(32).encode(), self.max_cost)
        self._fillers = {cost: backend.make(secrets.token_urlsafe(32).encode(), cost)
                         for cost in range(min(costs), self.max_cost)}
        self._verified: set[bytes] = set()
        self._cache_lock = threading.Lock()
        self._running = threading.BoundedSemaphore(at_once)
        self._places, self._per_client = at_once + waiting, per_client
        self._in_progress = 0  # checks running or waiting: at most _places
        self._by_client: dict[str, int] = {}  # the same by client address: at most _per_client each
        self.busy = Episode(f"basic auth: {at_once} password checks running and {waiting} waiting, or {per_client} "
                            "from one address, the most allowed: further attempts are answered 503 at once (a "
                            "password-guessing flood?)", "basic auth: checks below the limit again")

    def check(self, user: bytes, password: bytes, client: str = "") -> bool:
        """Whether ``user`` and ``password`` (as the Authorization header carried them) are a configured pair;
        raises AuthBusy, whoever is named, when too many checks are running or waiting, in all or from
        ``client`` (the peer's address)."""
        # length-prefixed, so no split of user and password can collide with another (a user may hold any byte)
        key = hashlib.sha256(len(user).to_bytes(8, "big") + user + password).digest()
        with self._cache_lock:
            if key in self._verified:
                return True
            admitted = self._in_progress < self._places and self._by_client.get(client, 0) < self._per_client
            if admitted:
                self._in_progress += 1
                self._by_client[client] = self._by_client.get(client, 0) + 1
        if not admitted:
            self.busy.hit()
            raise AuthBusy()
        self.busy.clear()
        try:
            with self._running:
                match = self._work(user, password[:KEY_BYTES])
        finally:
            self._leave(client)
        if match:
            with self._cache_lock:
                if len(self._verified) >= _CACHE_LIMIT:
                    self._verified.clear()
                self._verified.add(key)
        return match

    @property
    def checks_in_progress(self) -> int:
        """bcrypt checks running or waiting to run."""
        return self._in_progress

    def _leave(self, client: str) -> None:
        with self._cache_lock:
            self._in_progress -= 1
            left = self._by_client.pop(client) - 1
            if left:
                self._by_client[client] = left

    def work_for(self, user: bytes) -> tuple[str, ...]:
        """The hashes a failed check of ``user`` compares against, in order: 2^max_cost rounds in all."""
        stored = self._users.get(user)
        if stored is None:
            return (self.dummy_hash,)
        cost = hash_cost(stored) or self.max_cost
        return (stored, *(self._fillers[c] for c in range(cost, self.max_cost)))

    def _work(self, user: bytes, password: bytes) -> bool:
        hashes = self.work_for(user)
        if self._compare(password, hashes[0]) and user in self._users:
            return True
        for filler in hashes[1:]:  # the rest of a check at the highest cost
            self._compare(password, filler)
        return False

    def _compare(self, password: bytes, hashed: str) -> bool:
        try:
            return self._backend.check(password, hashed)
        except Exception as exc:  # any failure inside bcrypt is a refusal (401), never a dropped connection
            log.debug("basic auth: bcrypt failed: %s", type(exc).__name__)
            return False
