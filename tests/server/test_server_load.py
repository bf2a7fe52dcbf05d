"""A bounded load run: a real uvicorn server on loopback, fake models, 16 client threads (httpx) sending
2,000 requests across 3 tenants and 3 domains (chat, streaming chat and native solve mixed), with
background builds on. It must end with no 5xx, every answer right, and counts that add up."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from fakes import (
    CURRENT_RATIO,
    SIMPLE_INTEREST,
    Domain,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
    first_build_request,
    numbers_in,
    request_of,
)
from minicache.config.engine import AdmissionConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.sandbox import SandboxPool
from minicache.server import ServerConfig, create_app
from minicache.server.metrics import sample_value
from minicache.server.testing import BackgroundServer
from minicache.store import SQLiteStore

REQUESTS = 2000
THREADS = 16
DEADLINE_S = 90.0

GROSS_MARGIN = Domain(
    name="gross_margin",
    keyword="gross margin",
    wording="Revenue was ${0} and the cost of goods sold was ${1}. What is the gross margin in percent?",
    params=(("revenue", "revenue, dollars"), ("cogs", "cost of goods sold, dollars")),
    expression="(revenue - cogs) / revenue * 100",
    compute=lambda revenue, cogs: (revenue - cogs) / revenue * 100,
)
DOMAINS = (CURRENT_RATIO, SIMPLE_INTEREST, GROSS_MARGIN)
KEYS = {"sk-load-tenant-a1": "a", "sk-load-tenant-b2": "b", "sk-load-tenant-c3": "c"}
ADMIN = "sk-load-admin-0000"


class ThreeDomainTarget(FakeTarget):
    """The fake target, knowing a third domain (gross margin) besides the two of tests/fakes.py."""

    def _miss(self, messages):
        question = request_of(messages)
        if GROSS_MARGIN.keyword in question.lower():
            return f"```python\n{GROSS_MARGIN.program(numbers_in(question)[:2])}```"
        return super()._miss(messages)

    def _build(self, messages):
        question = first_build_request(messages)
        if GROSS_MARGIN.keyword in question.lower():
            return f"```python\n{GROSS_MARGIN.program(numbers_in(question)[:2])}```"
        return super()._build(messages)


def values_for(domain: Domain, rng: random.Random) -> tuple[int, ...]:
    if domain is CURRENT_RATIO:
        return rng.randint(1, 400) * 1000, rng.randint(1, 400) * 1000
    if domain is SIMPLE_INTEREST:
        return rng.randint(2, 200) * 500, rng.randint(1, 15), rng.randint(16, 40)
    return rng.randint(200, 900) * 1000, rng.randint(10, 190) * 1000


def make_jobs(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    keys = list(KEYS)
    jobs = []
    for i in range(n):
        domain = DOMAINS[rng.randrange(3)]
        values = values_for(domain, rng)
        kind = "stream" if i % 10 == 0 else "solve" if i % 10 == 5 else "chat"
        jobs.append({"key": keys[i % 3], "domain": domain, "values": values, "kind": kind})
    return jobs


def send(http: httpx.Client, job: dict[str, Any]) -> tuple[int, str, str | None]:
    """(status, route, answer text) of one request."""
    question = job["domain"].ask(*job["values"])
    headers = {"Authorization": f"Bearer {job['key']}"}
    if job["kind"] == "solve":
        r = http.post("/v1/solve", json={"question": question}, headers=headers)
        if r.status_code != 200:
            return r.status_code, "", None
        return 200, r.json()["route"], r.json()["answer_text"]
    body = {
        "model": "load",
        "messages": [
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": question},
        ],
    }
    if job["kind"] == "chat":
        r = http.post("/v1/chat/completions", json=body, headers=headers)
        if r.status_code != 200:
            return r.status_code, "", None
        return 200, r.json()["minicache"]["route"], r.json()["choices"][0]["message"]["content"]
    with http.stream(
        "POST", "/v1/chat/completions", json={**body, "stream": True}, headers=headers
    ) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, "", None
        text, route, done = "", "", False
        for line in r.iter_lines():
            if not line:
                continue
            assert line.startswith("data: "), line
            if line == "data: [DONE]":
                done = True
                continue
            chunk = json.loads(line[len("data: ") :])
            text += chunk["choices"][0]["delta"].get("content") or ""
            if chunk["choices"][0]["finish_reason"] == "stop":
                route = chunk["minicache"]["route"]
        assert done and route, "stream ended without a final chunk and [DONE]"
        return 200, route, text


@pytest.mark.load
@pytest.mark.timeout(300)
def test_bounded_load_run_has_no_server_errors_and_consistent_counts(tmp_path):
    jobs = make_jobs(REQUESTS)
    statuses: Counter[int] = Counter()
    routes: Counter[str] = Counter()
    wrong: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    next_job = iter(range(len(jobs)))

    with SandboxPool(size=4) as sandbox:
        engine = MiniCache(
            ThreeDomainTarget(),
            FakeSmall(),
            store=SQLiteStore(tmp_path / "load.db"),
            embedder=HashEmbedder(),
            sandbox=sandbox,
            # admission off: with fake models no build pays once its estimates warm up
            config=EngineConfig(background_builds=True, admission=AdmissionConfig(enabled=False)),
        )
        config = ServerConfig(api_keys=KEYS, admin_keys={ADMIN}, rate_per_s=0, max_inflight=256)
        try:
            with BackgroundServer(create_app(engine, config)) as server:
                began = time.perf_counter()
                deadline = began + DEADLINE_S

                def worker() -> None:
                    try:
                        with httpx.Client(base_url=server.url, trust_env=False, timeout=60) as http:
                            while time.perf_counter() < deadline:
                                with lock:
                                    i = next(next_job, None)
                                if i is None:
                                    return
                                job = jobs[i]
                                status, route, text = send(http, job)
                                expected = job["domain"].answer(*job["values"])
                                right = text is not None and float(text) == pytest.approx(
                                    expected, rel=1e-8
                                )
                                ok = status != 200 or right
                                with lock:
                                    statuses[status] += 1
                                    routes[route] += 1
                                    if not ok:
                                        wrong.append(
                                            f"{job['domain'].name}{job['values']}: {text!r} != {expected!r}"
                                        )
                    except BaseException as exc:  # noqa: BLE001 - reported below
                        failures.append(exc)

                threads = [
                    threading.Thread(target=worker, name=f"load-{k}") for k in range(THREADS)
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(DEADLINE_S + 60)
                elapsed = time.perf_counter() - began
                sent = sum(statuses.values())
                # Builds run on one background worker and may still be queued when the last request
                # returns; the entry counts checked below are about where the cache ends up.
                engine.wait_for_builds(timeout=120)

                with httpx.Client(
                    base_url=server.url,
                    trust_env=False,
                    timeout=60,
                    headers={"Authorization": f"Bearer {ADMIN}"},
                ) as admin:
                    metrics = admin.get("/metrics").text
                    stats = {
                        t: admin.get("/admin/stats", params={"tenant": t}).json()
                        for t in KEYS.values()
                    }
                    assert admin.get("/health").json()["status"] == "ok"
        finally:
            engine.close()

    print(
        f"\nload: {sent} requests from {THREADS} threads in {elapsed:.1f}s = {sent / elapsed:.0f} requests/s; "
        f"statuses {dict(statuses)}; routes {dict(routes)}; "
        f"entries {[s['entries_active'] for s in stats.values()]}, "
        f"builds ok {sum(s['builds_ok'] for s in stats.values())}"
    )
    assert failures == [], failures[:3]
    assert sent == REQUESTS or elapsed >= DEADLINE_S, (sent, elapsed)
    assert sent > 0
    assert statuses == Counter({200: sent}), statuses  # no 5xx, and nothing else either
    assert wrong == [], wrong[:5]
    assert routes["hit"] > sent // 2  # the cache did its job
    assert sample_value(metrics, "minicache_http_errors_total") == 0
    # the engine's counters add up, per tenant and in total
    for tenant, s in stats.items():
        assert s["requests"] == s["hits"] + s["misses"] + s["fallbacks"] + s["errors"], (tenant, s)
        assert s["errors"] == 0 and s["builds_failed"] == 0
        assert s["entries_active"] >= 3, (tenant, s)  # each tenant has an entry per domain
    assert sum(s["requests"] for s in stats.values()) == sent
    assert sum(s["hits"] for s in stats.values()) == routes["hit"]
    # ... and so do the server's
    assert sample_value(metrics, "minicache_requests_total") == sent
    for route in ("hit", "miss", "fallback"):
        assert sample_value(metrics, "minicache_requests_total", {"route": route}) == routes[route]
    for tenant in KEYS.values():
        assert (
            sample_value(metrics, "minicache_requests_total", {"tenant": tenant})
            == stats[tenant]["requests"]
        )
    assert sample_value(metrics, "minicache_stage_seconds_count", {"stage": "total"}) == sent
