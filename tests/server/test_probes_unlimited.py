"""The liveness and readiness probes get through the in-flight limits: a probe refused for load
would take a busy server out of rotation (or restart it) exactly when it is serving."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx

from minicache.server.middleware import UNLIMITED_PATHS, GuardMiddleware


async def answer_ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def full_guard() -> GuardMiddleware:
    """A guard whose every slot is taken: nothing it limits gets in."""
    gauge = SimpleNamespace(inc=lambda: None, dec=lambda: None)
    metrics = SimpleNamespace(inflight=gauge, http_done=lambda *args: None)
    return GuardMiddleware(
        answer_ok,
        max_body_bytes=1024,
        max_inflight=0,
        max_inflight_per_caller=0,
        body_timeout_s=5.0,
        caller=lambda scope: "ip:127.0.0.1",
        metrics=metrics,  # type: ignore[arg-type]
    )


def test_health_and_ready_are_never_refused_for_load():
    assert {"/health", "/ready"} <= UNLIMITED_PATHS

    async def probe() -> dict[str, httpx.Response]:
        transport = httpx.ASGITransport(app=full_guard())
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return {path: await client.get(path) for path in ("/health", "/ready", "/v1/models")}

    answers = asyncio.run(probe())
    assert answers["/health"].status_code == answers["/ready"].status_code == 200
    refused = answers["/v1/models"]
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
