"""Who is calling: ``Authorization: Bearer <key>`` -> tenant (and admin or not); per-key rate limits,
and a throttle on failed authentication per client address.

Keys are looked up by their SHA-256 digest, so the lookup time says nothing about a key's prefix.
Without any API key configured, auth is off: every caller is tenant "default". The admin endpoints
always need an admin key: with none configured they answer 401 to everyone.

Wrong keys are throttled per client address: each one takes a token from that address's bucket
(``auth_fail_burst`` tokens, refilled at ``auth_fail_per_s``); while the bucket is empty every request
from that address that sends a key gets 429, right keys included, since a guesser cannot be told
apart from the user it shares an address with and must learn nothing from its guesses.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass

from minicache.server.config import ServerConfig
from minicache.server.errors import ApiError

DEFAULT_TENANT = "default"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


@dataclass(frozen=True)
class Principal:
    tenant: str | None  # None: an admin-only key, which serves no tenant's requests
    admin: bool
    bucket: str  # what the rate limit is counted against: a key's digest prefix or a client address


class Authenticator:
    def __init__(self, config: ServerConfig) -> None:
        self.enabled = config.auth_enabled
        self._tenants = {_digest(k): t for k, t in config.api_keys.items()}
        self._admins = {_digest(k) for k in config.admin_keys}

    @property
    def has_admin_keys(self) -> bool:
        return bool(self._admins)

    def caller(self, authorization: str | None, client: str) -> str:
        """Whose slot a request takes in the in-flight limits: its key's tenant, or its address."""
        if authorization and self.enabled:
            try:
                digest = _digest(_bearer(authorization))
            except ApiError:
                return f"ip:{client}"
            tenant = self._tenants.get(digest)
            if tenant is not None:
                return f"tenant:{tenant}"
            if digest in self._admins:
                return f"admin:{digest.hex()[:16]}"
        return f"ip:{client}"

    def tenants(self) -> set[str]:
        return set(self._tenants.values()) | {DEFAULT_TENANT}

    def authenticate(self, authorization: str | None, client: str) -> Principal:
        """The caller, or 401. Admin rights are checked by the caller of this (403)."""
        if not self.enabled:  # every caller is "default"; a key only matters if it is an admin key
            try:
                digest = _digest(_bearer(authorization)) if authorization else None
            except ApiError:
                digest = None
            if digest is not None and digest in self._admins:
                return Principal(DEFAULT_TENANT, admin=True, bucket=f"key:{digest.hex()[:16]}")
            return Principal(DEFAULT_TENANT, admin=False, bucket=f"ip:{client}")
        if not authorization:
            raise ApiError(
                401,
                "Missing API key: send 'Authorization: Bearer <key>'.",
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        digest = _digest(_bearer(authorization))
        tenant = self._tenants.get(digest)
        admin = digest in self._admins
        if tenant is None and not admin:
            raise ApiError(
                401,
                "Invalid API key.",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return Principal(tenant, admin=admin, bucket=f"key:{digest.hex()[:16]}")


def _bearer(authorization: str) -> str:
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(
            401,
            "Malformed Authorization header: expected 'Bearer <key>'.",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return key.strip()


class RateLimiter:
    """A token bucket per key: ``rate_per_s`` refill, at most ``burst`` tokens; one token per request."""

    def __init__(self, rate_per_s: float, burst: int, max_buckets: int = 10_000) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self.max_buckets = max_buckets
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, bucket: str, now: float | None = None, *, take: bool = True) -> float | None:
        """None if the request may go ahead (and a token was taken, unless ``take`` is false), else the
        seconds until a token is available."""
        if self.rate <= 0:
            return None
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(bucket, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if not take:
                return None if tokens >= 1.0 else (1.0 - tokens) / self.rate
            if tokens >= 1.0:
                self._buckets[bucket] = (tokens - 1.0, now)
                return None
            self._buckets[bucket] = (tokens, now)
            if len(self._buckets) > self.max_buckets:
                self._prune(now)
            return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate
        for key, (_, last) in list(self._buckets.items()):
            if now - last >= full_after:  # refilled: the same as having no bucket
                del self._buckets[key]

    def check(self, bucket: str) -> None:
        wait = self.acquire(bucket)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise ApiError(
                429,
                f"Rate limit exceeded: retry in {seconds}s.",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(seconds)},
            )


class FailedAuthThrottle:
    """Failed authentications per client address, as a token bucket (see the module docstring)."""

    def __init__(self, per_s: float, burst: int) -> None:
        self.buckets = RateLimiter(per_s, burst)

    def check(self, client: str) -> None:
        """429 while ``client`` has used up its failures."""
        wait = self.buckets.acquire(client, take=False)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise ApiError(
                429,
                f"Too many failed authentications from this address: retry in {seconds}s.",
                code="too_many_auth_failures",
                headers={"Retry-After": str(seconds)},
            )

    def failed(self, client: str) -> None:
        self.buckets.acquire(client)


def _is_api_path(path: str) -> bool:
    return path.startswith(("/v1/", "/admin/"))


def refuse_before_body(
    auth: Authenticator,
    throttle: FailedAuthThrottle,
    path: str,
    authorization: str | None,
    client: str,
) -> ApiError | None:
    """The answer for an API request whose key already decides it, before its body is read, or None.

    The routers check the key again and give the same answers; checking it here, from the headers
    alone, means a request without a valid key is answered at once instead of holding a slot (and a
    connection) while its body trickles in. A wrong key counts against ``client``'s throttle here,
    and only here, since it never reaches the routers."""
    if not _is_api_path(path):
        return None
    if not authorization:
        if auth.enabled:
            return ApiError(
                401,
                "Missing API key: send 'Authorization: Bearer <key>'.",
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if path.startswith("/admin/"):
            return ApiError(
                401,
                "Missing admin key: send 'Authorization: Bearer <admin key>'.",
                code="missing_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return None
    if not auth.enabled:
        return None  # every caller is "default"; the admin endpoints judge their keys themselves
    try:
        throttle.check(client)
        auth.authenticate(authorization, client)
    except ApiError as exc:
        if exc.status == 401:
            throttle.failed(client)
        return exc
    return None
