"""Operating the server: liveness and readiness (store, routing, each backend), request ids on every
answer and in the log of every 5xx, log lines a request cannot forge, the locally served Swagger UI
and ``GET /`` to the dashboard."""

from __future__ import annotations

import logging

import httpx
import pytest
import test_server
from fastapi import FastAPI

from minicache.models.openai import OpenAIBackend
from minicache.server import ServerConfig
from minicache.server.request_ids import EscapingFilter
from minicache.server.testing import BackgroundServer

make = test_server.make  # test_server's app over fakes
rig = test_server.rig


def test_health_is_liveness_and_ready_names_each_part(rig):
    health = rig.client.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    ready = rig.client.get("/ready")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["failing"] == [] and body["store"] == body["target"] == body["small"] == "ok"


def test_ready_fails_naming_the_store_when_it_is_unreachable(rig, monkeypatch):
    def broken(tenant):
        raise OSError("disk gone")

    monkeypatch.setattr(rig.mc.store, "counters", broken)
    r = rig.client.get("/ready")
    assert r.status_code == 503 and r.json()["failing"] == ["store"] and "disk" not in r.text
    assert rig.client.get("/health").status_code == 200  # the process is still up


@pytest.mark.allow_model_requests
def test_ready_fails_when_a_backend_is_down_and_passes_when_it_answers(rig, monkeypatch):
    models = FastAPI()
    models.get("/v1/models")(lambda: {"object": "list", "data": []})
    with BackgroundServer(models) as up:
        reachable = OpenAIBackend(f"{up.url}/v1", "m")
        monkeypatch.setattr(rig.mc, "target", reachable)
        r = rig.client.get("/ready")
        assert r.status_code == 200 and r.json()["target"] == "ok", r.text
        port = int(up.url.rsplit(":", 1)[1])
    down = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m")  # the same server, now stopped
    monkeypatch.setattr(rig.mc, "target", down)
    r = rig.client.get("/ready")
    assert r.status_code == 503, r.text
    assert r.json()["failing"] == ["target"] and r.json()["target"].startswith("unreachable")
    reachable.close()
    down.close()


def test_every_answer_carries_a_request_id_and_a_5xx_logs_its_cause_with_it(
    rig, monkeypatch, caplog
):
    r = rig.client.get("/health")
    assert len(r.headers["x-request-id"]) == 32
    r = rig.client.get("/health", headers={"X-Request-Id": "trace-42.a_b"})
    assert r.headers["x-request-id"] == "trace-42.a_b"
    forged = rig.client.get("/health", headers={"X-Request-Id": "bad id\twith tab"})
    assert forged.headers["x-request-id"] != "bad id\twith tab"

    def boom(*args, **kwargs):
        raise RuntimeError("the cause of this 500")

    monkeypatch.setattr(rig.mc, "solve", boom)
    with caplog.at_level(logging.INFO, logger="minicache.server"):
        r = rig.client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}]},
            headers={"X-Request-Id": "req-500"},
        )
    assert r.status_code >= 500 and r.headers["x-request-id"] == "req-500"
    assert "the cause of this 500" not in r.text  # never a traceback or message to the client
    tagged = [rec for rec in caplog.records if getattr(rec, "request_id", None) == "req-500"]
    assert tagged and any("[request req-500]" in rec.getMessage() for rec in tagged)
    assert any(
        rec.exc_info and "the cause of this 500" in str(rec.exc_info[1]) for rec in tagged
    ), [rec.getMessage() for rec in tagged]


def test_a_request_value_cannot_forge_a_log_line(rig, caplog):
    @rig.app.get("/boom/{value}")
    async def boom(value: str) -> None:  # a handler that fails on a path a client chose
        raise RuntimeError("handler failed")

    with caplog.at_level(logging.INFO, logger="minicache.server"):
        r = rig.client.get("/boom/x%00%0aERROR:minicache.server:FORGED")
    assert r.status_code == 500
    for rec in caplog.records:
        text = logging.Formatter("%(levelname)s:%(name)s:%(message)s").format(rec)
        assert "\nERROR:minicache.server:FORGED" not in text, text
    assert any("\\x0aERROR:minicache.server:FORGED" in rec.getMessage() for rec in caplog.records)
    record = logging.LogRecord("minicache.server", logging.INFO, "", 0, "%s", ("a\x00\r\nb",), None)
    EscapingFilter().filter(record)
    assert record.getMessage() == "a\\x00\\x0d\\x0ab"


def test_docs_are_served_without_a_cdn_and_the_root_leads_to_the_dashboard(rig):
    rig.client.follow_redirects = False
    root = rig.client.get("/")
    assert root.status_code == 307 and root.headers["location"] == "/dashboard"
    page = rig.client.get("/docs")
    assert page.status_code == 200 and "/openapi.json" in page.text
    assert "cdn" not in page.text.lower() and "https://" not in page.text
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png"):
        r = rig.client.get(f"/docs/static/{asset}")
        assert r.status_code == 200 and len(r.content) > 100, asset
    assert rig.client.get("/docs/static/../../etc/passwd").status_code == 404
    assert rig.client.get("/openapi.json").status_code == 200


def test_ready_and_health_need_no_key(make):
    rig = make(ServerConfig(api_keys={"sk-tenant-a-0001": "a"}, rate_per_s=0))
    assert rig.client.get("/health").status_code == 200
    assert rig.client.get("/ready").status_code == 200
    assert httpx.codes.is_success(rig.client.get("/docs").status_code)


def test_every_option_is_in_the_committed_reference_with_its_default_and_a_description():
    from pathlib import Path

    from minicache.server import reference

    text = reference.render()
    rows = {
        line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `")
    }
    for key in reference.options():
        [row] = [line for name, line in rows.items() if name.startswith(f"`{key}`")]
        description = row.rstrip(" |").rsplit("|", 1)[1].strip()
        assert description, f"{key} has no description: comment its field or add it to NOTES"
    for name in reference.env_variables():
        assert name in text, name
    committed = Path(__file__).parents[2] / "docs" / "configuration.md"
    assert committed.read_text(encoding="utf-8") == text, (
        "docs/configuration.md is stale: python -m minicache.server.reference > docs/configuration.md"
    )


def test_the_grafana_dashboard_reads_metrics_the_server_exports(rig):
    import json
    import re
    from pathlib import Path

    from fakes import CR_VALUES, CURRENT_RATIO

    rig.client.post("/v1/solve", json={"question": CURRENT_RATIO.ask(*CR_VALUES[0])})
    exported = rig.client.get("/metrics").text
    grafana = json.loads(
        (Path(__file__).parents[2] / "docs" / "grafana-minicache.json").read_text(encoding="utf-8")
    )
    exprs = [t["expr"] for panel in grafana["panels"] for t in panel["targets"]]
    names = {name for e in exprs for name in re.findall(r"minicache_\w+", e)}
    assert names
    declared = set(re.findall(r"^# TYPE (\w+) (\w+)", exported, re.M))
    known = {n for n, _ in declared}
    known |= {f"{n}_total" for n, kind in declared if kind == "counter"}
    known |= {f"{n}_{s}" for n, kind in declared if kind == "histogram" for s in ("bucket", "sum")}
    for name in names:
        assert name in known, f"{name} is not exported"
