"""``X-Forwarded-For`` is believed only from configured proxies (none by default): a loopback client
that rotates it cannot escape the failed-key throttle; behind a trusted proxy the throttle counts the
rightmost address the proxies did not write themselves."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from fakes import guarded_server
from minicache.errors import ConfigError
from minicache.server import ServerConfig
from minicache.server.forwarded import TrustedProxies
from minicache.server.testing import BackgroundServer

KEY = "sk-fwd-tenant-a1"
WRONG = {"Authorization": "Bearer sk-wrong-guess-00"}


@contextmanager
def served(tmp_path, sandbox, **settings) -> Iterator[BackgroundServer]:
    config = ServerConfig(
        api_keys={KEY: "a"}, rate_per_s=0, auth_fail_per_s=0.01, auth_fail_burst=5, **settings
    )
    with guarded_server(tmp_path, sandbox, config) as server:
        yield server


def guesses(server: BackgroundServer, n: int, forwarded: list[str]) -> list[int]:
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as http:
        return [
            http.get(
                "/v1/models", headers={**WRONG, "X-Forwarded-For": forwarded[i % len(forwarded)]}
            ).status_code
            for i in range(n)
        ]


def test_the_rightmost_untrusted_hop_is_the_client():
    proxies = TrustedProxies(["10.0.0.0/8", "::1"])
    assert proxies.client("127.0.0.1", [b"9.9.9.9"]) == "127.0.0.1"  # peer not trusted
    assert proxies.client("10.0.0.5", [b"1.2.3.4, 9.9.9.9"]) == "9.9.9.9"
    assert proxies.client("10.0.0.5", [b"1.2.3.4", b"9.9.9.9, 10.1.1.1"]) == "9.9.9.9"
    assert proxies.client("10.0.0.5", [b"10.2.2.2, 10.1.1.1"]) == "10.2.2.2"  # all trusted
    assert proxies.client("10.0.0.5", [b"1.2.3.4, not-an-ip"]) == "10.0.0.5"
    assert proxies.client("10.0.0.5", []) == "10.0.0.5"
    assert proxies.client("::1", [b"[2001:db8::1]"]) == "2001:db8::1"
    assert not TrustedProxies([]).trusts("127.0.0.1")


def test_trusted_proxies_must_be_addresses_or_networks():
    assert ServerConfig(trusted_proxies=["10.0.0.0/8", "::1"]).trusted_proxies == (
        "10.0.0.0/8",
        "::1",
    )
    with pytest.raises(ConfigError, match="trusted_proxies"):
        ServerConfig(trusted_proxies=["proxy.example"])


@pytest.mark.timeout(60)
def test_rotating_x_forwarded_for_from_an_untrusted_peer_does_not_escape_the_throttle(
    tmp_path, sandbox
):
    rotating = [f"203.0.113.{i}" for i in range(1, 201)]
    with served(tmp_path, sandbox) as server:
        statuses = guesses(server, 200, rotating)
    assert statuses[:5] == [401] * 5
    assert statuses[5:] == [429] * 195


@pytest.mark.timeout(60)
def test_behind_a_trusted_proxy_the_forwarded_client_is_throttled(tmp_path, sandbox):
    with served(tmp_path, sandbox, trusted_proxies=["127.0.0.1"]) as server:
        # the client writes "1.1.1.1"; the proxy appends the address it saw
        spoofer = guesses(server, 8, ["1.1.1.1, 198.51.100.7"])
        others = guesses(server, 5, [f"198.51.100.{i}" for i in range(10, 15)])
    assert spoofer == [401] * 5 + [429] * 3
    assert others == [401] * 5  # each a different client, each with its own budget
