"""Requests without a valid key cannot hold the slots keyed tenants need: an API request's key is
checked from its headers before its body is read (401 at once, connection closed), and keyless
requests to other paths (the dashboard's login form) share a small pool of their own. Real uvicorn
on loopback, slow bodies sent a byte every 0.5 s; bounded to finish in seconds."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from fakes import CURRENT_RATIO, guarded_server
from minicache.server import ServerConfig
from minicache.server.testing import BackgroundServer

KEY_A, KEY_B = "sk-body-tenant-a1", "sk-body-tenant-b2"


@contextmanager
def served(tmp_path, sandbox, **limits) -> Iterator[BackgroundServer]:
    config = ServerConfig(api_keys={KEY_A: "a", KEY_B: "b"}, rate_per_s=0, **limits)
    with guarded_server(tmp_path, sandbox, config) as server:
        yield server


class SlowBody(threading.Thread):
    """A request whose body (Content-Length 200) arrives a byte every 0.5 s until stopped."""

    def __init__(
        self, server: BackgroundServer, path: str, key: str | None, source: str = "127.0.0.1"
    ) -> None:
        super().__init__(daemon=True)
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        self.head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}"
            "Content-Length: 200\r\n\r\n"
        ).encode()
        self.sock = socket.create_connection(
            (server.host, server.port), timeout=5, source_address=(source, 0)
        )
        self.stop = threading.Event()
        self.answer = b""
        self.answered_after: float | None = None
        self.body_sent = 0  # body bytes sent so far
        self.body_sent_when_answered: int | None = None

    def run(self) -> None:
        began = time.monotonic()
        self.sock.sendall(self.head)
        self.sock.settimeout(0.5)
        try:
            while not self.stop.is_set():
                try:
                    chunk = self.sock.recv(65536)
                except TimeoutError:
                    self.sock.sendall(b" ")
                    self.body_sent += 1
                    continue
                if not chunk:
                    break
                self.answer += chunk
                if self.answered_after is None:
                    self.answered_after = time.monotonic() - began
                    self.body_sent_when_answered = self.body_sent
        except OSError:
            pass  # closed by the server while sending
        finally:
            self.sock.close()

    @property
    def status(self) -> bytes:
        return self.answer.split(b"\r\n", 1)[0]


def chat(http: httpx.Client, key: str, values: tuple[int, int]) -> int:
    body = {"model": "m", "messages": [{"role": "user", "content": CURRENT_RATIO.ask(*values)}]}
    return http.post(
        "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ).status_code


@pytest.mark.timeout(60)
def test_keyless_and_wrong_key_slow_bodies_get_401_at_once_and_tenants_keep_working(
    tmp_path, sandbox
):
    with served(tmp_path, sandbox, max_inflight=4, auth_fail_burst=1000) as server:
        # as many as the attack: 64 slow bodies from four loopback addresses
        sources = [f"127.0.3.{i}" for i in range(1, 5)]
        slow = [SlowBody(server, "/v1/chat/completions", None, sources[i % 4]) for i in range(48)]
        slow += [
            SlowBody(server, "/v1/solve", "sk-wrong-key-000", sources[i % 4]) for i in range(16)
        ]
        for s in slow:
            s.start()
        time.sleep(1.0)
        with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http:
            statuses = [chat(http, KEY_B, (40_000 + i, 30_000)) for i in range(10)]
        for s in slow:
            s.stop.set()
            s.join(5)
    assert statuses == [200] * 10
    assert [s.status for s in slow] == [b"HTTP/1.1 401 Unauthorized"] * 64
    # answered before the body could arrive (200 bytes at one per 0.5 s), not after reading it
    assert all(
        s.body_sent_when_answered is not None and s.body_sent_when_answered < 200 for s in slow
    )
    assert all(b"connection: close" in s.answer.lower() for s in slow)
    print(
        f"64 slow keyless/wrong-key bodies: 401 within {max(s.answered_after for s in slow):.3f} s"
    )


@pytest.mark.timeout(60)
def test_keyless_requests_elsewhere_share_their_own_small_pool(tmp_path, sandbox):
    with served(
        tmp_path, sandbox, max_inflight=4, max_inflight_keyless=2, body_timeout_s=30
    ) as server:
        slow = [SlowBody(server, "/dashboard/login", None) for _ in range(6)]
        for s in slow:
            s.start()
        time.sleep(1.0)
        with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http:
            statuses = [chat(http, KEY_A, (50_000 + i, 20_000)) for i in range(4)]
        refused = [s for s in slow if s.status.startswith(b"HTTP/1.1 503")]
        for s in slow:
            s.stop.set()
            s.join(5)
    assert statuses == [200] * 4
    assert len(refused) == 4  # two hold the keyless pool; the tenant's slots stay free
    assert all(b"retry-after: 1" in s.answer.lower() for s in refused)
