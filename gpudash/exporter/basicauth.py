"""Basic auth as Prometheus exporter-toolkit does it (web/handler.go): bcrypt, the same work for every guess.

An unknown user is compared against a dummy hash, so it costs what a known user with a wrong password
costs and timing does not tell which users exist. One bcrypt runs at a time (the toolkit's bcryptMtx):
a flood of guesses burns one core, not all of them. A correct password is remembered as a SHA-256
digest, so a scrape every few seconds does not pay bcrypt's deliberate slowness each time; only
correct credentials enter that cache, so guesses cannot push the scraper's entry out.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import logging
import re
import secrets
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("gpudash.exporter")

HASH = re.compile(r"\$2[aby]?\$(?P<cost>\d\d)\$[./A-Za-z0-9]{53}")
MIN_COST, MAX_COST = 4, 31  # the range Go's bcrypt accepts (checkCost)
# Go's bcrypt.CompareHashAndPassword, which exporter-toolkit calls, never refuses a long password: only
# GenerateFromPassword returns ErrPasswordTooLong. Blowfish's ExpandKey reads 18 words (72 bytes) of the key
# cyclically, so bytes past the 72nd are ignored (golang.org/x/crypto bcrypt/bcrypt.go and blowfish/block.go;
# golang/go#36546). Python's bcrypt >= 4.1 raises ValueError instead, so the password is cut here to match.
KEY_BYTES = 72
_CACHE_LIMIT = 256


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
        backend.check(b"", re.sub(r"\$\d\d\$", f"${MIN_COST:02d}$", hashed, count=1))
    except Exception:  # whatever the backend raises, the hash is unusable
        return False
    return True


class BasicAuth:
    """Users and their bcrypt hashes; ``check`` does the same work whether the user exists or not."""

    def __init__(self, users: dict[str, str], backend: Bcrypt) -> None:
        self._users = {user.encode("utf-8", "surrogatepass"): hashed for user, hashed in users.items()}
        self._backend = backend
        # made once, with the highest cost configured, so an unknown user costs at least what any known one does
        cost = max((hash_cost(hashed) or MIN_COST for hashed in users.values()), default=MIN_COST)
        self.dummy_hash = backend.make(secrets.token_urlsafe(32).encode(), cost)
        self._verified: set[bytes] = set()
        self._cache_lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()

    def check(self, user: bytes, password: bytes) -> bool:
        """Whether ``user`` and ``password`` (as the Authorization header carried them) are a configured pair."""
        stored = self._users.get(user)
        # length-prefixed, so no split of user and password can collide with another (a user may hold any byte)
        key = hashlib.sha256(len(user).to_bytes(8, "big") + user + password).digest()
        with self._cache_lock:
            if key in self._verified:
                return True
        with self._bcrypt_lock:
            try:
                match = self._backend.check(password[:KEY_BYTES], self.dummy_hash if stored is None else stored)
            except Exception as exc:  # any failure inside bcrypt is a refusal (401), never a dropped connection
                log.debug("basic auth: bcrypt failed: %s", type(exc).__name__)
                match = False
        if stored is None or not match:
            return False
        with self._cache_lock:
            if len(self._verified) >= _CACHE_LIMIT:
                self._verified.clear()
            self._verified.add(key)
        return True
