"""``/metrics`` labels come from fixed sets: made-up HTTP methods and paths are counted as "other",
so 2,100 of them leave the number of series unchanged."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from fakes import FakeSmall, FakeTarget, HashEmbedder
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.metrics import sample_value
from minicache.store import SQLiteStore

KEY = "sk-metrics-tenant-a1"


def series_names(text: str) -> set[str]:
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and line[0] != "#"}


def series(text: str) -> int:
    return len(series_names(text))


@pytest.mark.timeout(120)
def test_made_up_methods_and_paths_add_no_series(tmp_path, sandbox):
    config = ServerConfig(api_keys={KEY: "a"}, rate_per_s=0, public_metrics=True)
    engine = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "metrics.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False),
    )
    try:
        with TestClient(create_app(engine, config)) as client:

            def probe(i: int) -> None:
                """A made-up method on a route, a made-up path, and both at once."""
                client.request(f"PROBE{i}METHOD", "/v1/models")
                client.get(f"/made/up/{i}")
                client.request(f"PROBE{i}METHOD", f"/made/up/{i}")

            for i in range(5):  # every fixed label value seen once, the scrape's own too
                probe(i)
            client.get("/metrics")
            before = client.get("/metrics").text
            for i in range(5, 705):  # 2,100 requests
                probe(i)
            after = client.get("/metrics").text
    finally:
        engine.close()
    assert series(after) == series(before), series_names(after) ^ series_names(before)
    assert sample_value(after, "minicache_http_requests_total", {"method": "other"}) >= 1400
    assert sample_value(after, "minicache_http_requests_total", {"path": "other"}) >= 1400
    assert "PROBE" not in after and "/made/up" not in after
    print(f"/metrics: {series(before)} series before 2,100 made-up requests, {series(after)} after")
