"""``x-should-retry: false`` on every 4xx that a retry of the same request cannot change (all but 408
and 429), whichever layer answers it: the error handlers, FastAPI's own validation and routing, or
the guard middleware before the app. The official ``openai`` client reads that header before its own
rules, so a rejected request reaches the server once."""

from __future__ import annotations

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from fakes import FakeSmall, FakeTarget, HashEmbedder
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.errors import ApiError
from minicache.server.testing import BackgroundServer
from minicache.store import SQLiteStore

KEY = "sk-retry-tenant-01"


@pytest.fixture
def engine(tmp_path, sandbox):
    mc = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False, audit_rate=0.0),
    )
    yield mc
    mc.close()


class CountingApp:
    """The app, counting the HTTP requests that reach the server."""

    def __init__(self, app) -> None:
        self.app = app
        self.paths: list[str] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


def test_the_openai_client_sends_a_rejected_request_once(engine):
    app = CountingApp(create_app(engine, ServerConfig(rate_per_s=0)))
    with BackgroundServer(app) as server, httpx.Client(trust_env=False, timeout=30) as http:
        client = openai.OpenAI(
            base_url=f"{server.url}/v1", api_key="sk-test", http_client=http, max_retries=3
        )
        for bad in (
            {"messages": [{"role": "user", "content": "   "}]},  # the engine's own check
            {"messages": [{"role": "user", "content": "Hi"}], "temperature": 99},  # pydantic's
            {"messages": []},
        ):
            app.paths.clear()
            with pytest.raises(openai.BadRequestError) as info:
                client.chat.completions.create(model="m", **bad)
            assert info.value.response.headers["x-should-retry"] == "false"
            assert app.paths == ["/v1/chat/completions"], bad  # one request, no retry


def test_every_4xx_a_retry_cannot_change_says_so_and_timeouts_and_rate_limits_do_not(engine):
    config = ServerConfig(api_keys={KEY: "a"}, rate_per_s=0.001, burst=1, max_body_bytes=1024)
    client = TestClient(create_app(engine, config))
    auth = {"Authorization": f"Bearer {KEY}"}
    refused = {
        "invalid JSON": client.post("/v1/chat/completions", content=b"{", headers=auth),
        "no key": client.get("/v1/models"),
        "wrong key": client.get("/v1/models", headers={"Authorization": "Bearer sk-wrong-0000"}),
        "unknown path": client.get("/v1/nothing-here", headers=auth),
        "wrong method": client.get("/v1/chat/completions", headers=auth),
        "too large": client.post("/v1/chat/completions", content=b"x" * 4000, headers=auth),
    }
    for name, r in refused.items():
        assert 400 <= r.status_code < 500 and r.status_code not in (408, 429), (name, r.text)
        assert r.headers["x-should-retry"] == "false", (name, r.status_code)
        assert r.json()["error"]["message"], name
    # a request that passes the rate limit and is refused after it spends the one-request burst;
    # the next is rate limited, and a later try can succeed, so the client may retry that one
    blank = {"messages": [{"role": "user", "content": "   "}]}
    spent = client.post("/v1/chat/completions", json=blank, headers=auth)
    assert spent.status_code == 400 and spent.headers["x-should-retry"] == "false"
    limited = client.post("/v1/chat/completions", json=blank, headers=auth)
    assert limited.status_code == 429 and "x-should-retry" not in limited.headers, limited.text
    assert limited.headers["retry-after"]
    for status in (408, 429, 500, 502, 503):
        assert "x-should-retry" not in (ApiError(status, "m").headers or {}), status
    # a header given by the raiser wins over the default
    given = ApiError(404, "m", headers={"x-should-retry": "true", "Retry-After": "1"})
    assert given.headers == {"x-should-retry": "true", "Retry-After": "1"}
    client.close()
