"""Connection floods on loopback against a real uvicorn server with the guarded protocol
(:mod:`minicache.server.connections`): idle connections and unfinished headers are closed after the
header timeout, connections over the per-address and total limits are refused with 503, slow bodies
are cut off, and a keyed tenant keeps getting 200 throughout. Bounded to finish in seconds."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from fakes import FakeSmall, FakeTarget, HashEmbedder, guarded_server
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig
from minicache.server.testing import BackgroundServer
from minicache.store import SQLiteStore

KEY = "sk-conn-tenant-a1"
HEADERS = {"Authorization": f"Bearer {KEY}"}
UNFINISHED = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"


@contextmanager
def served(tmp_path, sandbox, **limits) -> Iterator[BackgroundServer]:
    config = ServerConfig(api_keys={KEY: "a"}, rate_per_s=0, **limits)
    with guarded_server(tmp_path, sandbox, config) as server:
        yield server


def connect(server: BackgroundServer, n: int, first: bytes = b"") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection((server.host, server.port), timeout=5)
        if first:
            s.sendall(first)
        socks.append(s)
    return socks


def outcome(sock: socket.socket, wait_s: float) -> tuple[str, bytes]:
    """("closed", what the server sent before closing) or ("open", b"") if it is still open."""
    sock.settimeout(wait_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return "open", data
    except ConnectionResetError:
        pass
    return "closed", data


def keyed_ok(server: BackgroundServer) -> int:
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as http:
        return http.get("/v1/models", headers=HEADERS).status_code


@pytest.mark.timeout(60)
def test_idle_connections_and_unfinished_headers_are_closed_with_408(tmp_path, sandbox):
    with served(tmp_path, sandbox, header_timeout_s=1.0, max_connections_per_address=400) as server:
        idle = connect(server, 200)
        unfinished = connect(server, 50, UNFINISHED)
        began = time.monotonic()
        assert keyed_ok(server) == 200  # a tenant is served while the flood is open
        results = [outcome(s, 5.0) for s in unfinished + idle]
        took = time.monotonic() - began
        for s in idle + unfinished:
            s.close()
    assert [state for state, _ in results] == ["closed"] * 250
    assert all(data.startswith(b"HTTP/1.1 408 ") for _, data in results[:50])
    assert took < 6.0
    print(f"250 idle/unfinished connections closed {took:.2f} s after the tenant's 200")


@pytest.mark.timeout(60)
def test_connections_over_the_per_address_limit_are_refused_with_503_and_closed(tmp_path, sandbox):
    with served(
        tmp_path,
        sandbox,
        header_timeout_s=30.0,
        max_connections=300,
        max_connections_per_address=100,
    ) as server:
        held = connect(server, 100)
        refused = connect(server, 20)  # over the per-address limit
        per_address = [outcome(s, 5.0) for s in refused]
        assert all(state == "closed" for state, _ in per_address)
        assert all(
            data.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1" in data.lower()
            for _, data in per_address
        )
        for s in held[:10]:  # room for the tenant again once a few are gone
            s.close()
        time.sleep(0.2)
        assert keyed_ok(server) == 200
        for s in held[10:] + refused:
            s.close()


@pytest.mark.timeout(60)
def test_at_the_total_limit_the_longest_waiting_for_headers_make_room(tmp_path, sandbox):
    limits = {"max_connections": 50, "max_connections_per_address": 500}
    with served(tmp_path, sandbox, header_timeout_s=30.0, **limits) as server:
        held = connect(server, 50, UNFINISHED)
        later = connect(server, 10, UNFINISHED)
        evicted = [outcome(s, 2.0) for s in held[:10]]
        assert keyed_ok(server) == 200  # made room by closing the next-oldest
        assert all(data.startswith(b"HTTP/1.1 408 ") for _, data in evicted)
        assert outcome(held[10], 2.0)[1].startswith(b"HTTP/1.1 408 ")
        assert [outcome(s, 0.01)[0] for s in held[11:] + later] == ["open"] * 49
        for s in held + later:
            s.close()

    # every open connection is past its headers (bodies still arriving): nothing to evict, so 503
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
    )
    with served(
        tmp_path, sandbox, body_timeout_s=30.0, max_inflight_per_caller=64, **limits
    ) as server:
        held = connect(server, 50, head)
        time.sleep(0.3)
        over = connect(server, 10)
        assert all(outcome(s, 5.0)[1].startswith(b"HTTP/1.1 503 ") for s in over)
        for s in held + over:
            s.close()
        time.sleep(0.3)
        assert keyed_ok(server) == 200


@pytest.mark.timeout(60)
def test_a_keyed_body_that_never_ends_is_cut_off(tmp_path, sandbox):
    with served(tmp_path, sandbox, header_timeout_s=5.0, body_timeout_s=1.0) as server:
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: 100\r\n\r\n{"
        )
        slow = connect(server, 5, head)
        began = time.monotonic()
        results = [outcome(s, 6.0) for s in slow]
        took = time.monotonic() - began
        assert keyed_ok(server) == 200
        for s in slow:
            s.close()
    assert all(state == "closed" and b" 408 " in data.split(b"\r\n")[0] for state, data in results)
    assert took < 4.0


def test_serve_runs_uvicorn_with_the_guarded_protocol_and_without_its_forwarded_handling(
    tmp_path, sandbox, monkeypatch
):
    import uvicorn

    from minicache.server import serve
    from minicache.server.connections import GuardedH11Protocol

    seen: dict = {}
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: seen.update(c=self.config)
    )
    engine = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "serve.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    try:
        serve("127.0.0.1", 8123, config=ServerConfig(header_timeout_s=3.0), engine=engine)
    finally:
        engine.close()
    config = seen["c"]
    assert issubclass(config.http, GuardedH11Protocol) and config.http.header_timeout_s == 3.0
    assert config.proxy_headers is False


@pytest.mark.timeout(60)
def test_closed_connections_give_their_count_back_whatever_they_sent(tmp_path, sandbox):
    upgrade = b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    upgrade += b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    with served(tmp_path, sandbox, header_timeout_s=1.0) as server:
        count = server.server.config.http.count
        socks = connect(server, 20, upgrade) + connect(server, 20, UNFINISHED)
        socks += connect(server, 20, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        socks += connect(server, 20, b"NOT HTTP AT ALL\r\n\r\n")
        time.sleep(1.5)  # answered, timed out or still kept alive
        assert count.total == 40  # kept alive after /health, with or without Upgrade
        for s in socks:
            s.close()
        deadline = time.monotonic() + 5
        while count.total and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (count.total, count.by_address, count.waiting) == (0, {}, {})


@pytest.mark.timeout(60)
def test_a_body_the_app_never_reads_is_cut_off_a_second_after_the_body_timeout(tmp_path, sandbox):
    head = b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
    with served(tmp_path, sandbox, body_timeout_s=1.0) as server:
        began = time.monotonic()
        results = [outcome(s, 5.0) for s in connect(server, 5, head)]
        took = time.monotonic() - began
    assert all(state == "closed" and data.startswith(b"HTTP/1.1 404 ") for state, data in results)
    assert took < 4.0
