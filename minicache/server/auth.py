"""Who is calling: ``Authorization: Bearer <key>`` -> tenant (and admin or not); per-key rate limits.

Keys are looked up by their SHA-256 digest, so the lookup time says nothing about a key's prefix.
Without any API key configured, auth is off: every caller is tenant "default" (admin endpoints are
then open too, unless admin keys are configured, in which case they still need one).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass

from .config import ServerConfig
from .errors import ApiError

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
    def admin_open(self) -> bool:
        """Admin endpoints need no key: auth is off and no admin key is configured."""
        return not self.enabled and not self._admins

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
            return Principal(DEFAULT_TENANT, admin=self.admin_open, bucket=f"ip:{client}")
        if not authorization:
            raise ApiError(401, "Missing API key: send 'Authorization: Bearer <key>'.", code="missing_api_key",
                           headers={"WWW-Authenticate": "Bearer"})
        digest = _digest(_bearer(authorization))
        tenant = self._tenants.get(digest)
        admin = digest in self._admins
        if tenant is None and not admin:
            raise ApiError(401, "Invalid API key.", code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        return Principal(tenant, admin=admin, bucket=f"key:{digest.hex()[:16]}")


def _bearer(authorization: str) -> str:
    scheme, _, key = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(401, "Malformed Authorization header: expected 'Bearer <key>'.", code="invalid_api_key",
                       headers={"WWW-Authenticate": "Bearer"})
    return key.strip()


class RateLimiter:
    """A token bucket per key: ``rate_per_s`` refill, at most ``burst`` tokens; one token per request."""

    def __init__(self, rate_per_s: float, burst: int, max_buckets: int = 10_000) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self.max_buckets = max_buckets
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def acquire(self, bucket: str, now: float | None = None) -> float | None:
        """None if the request may go ahead, else the seconds until a token is available."""
        if self.rate <= 0:
            return None
        now = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.get(bucket, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
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
            raise ApiError(429, f"Rate limit exceeded: retry in {seconds}s.", code="rate_limit_exceeded",
                           headers={"Retry-After": str(seconds)})
