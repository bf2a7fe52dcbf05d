"""The OpenAI-compatible server, with fake models: FastAPI's TestClient for most behaviour, and the
official ``openai`` client talking unchanged to a real uvicorn server on loopback."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    Domain,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.errors import ConfigError
from minicache.server import ServerConfig, create_app, load_server_config
from minicache.server.auth import RateLimiter
from minicache.server.metrics import sample_value
from minicache.server.testing import BackgroundServer
from minicache.store import SQLiteStore

KEY_A, KEY_B, KEY_ADMIN, KEY_OPS = (
    "sk-tenant-a-0001",
    "sk-tenant-b-0002",
    "sk-admin-only-03",
    "sk-ops-admin-004",
)
AUTH = ServerConfig(
    api_keys={KEY_A: "a", KEY_B: "b", KEY_OPS: "ops"}, admin_keys={KEY_ADMIN, KEY_OPS}, rate_per_s=0
)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@dataclass
class Rig:
    mc: MiniCache
    target: FakeTarget
    store: SQLiteStore
    client: TestClient
    app: object


@pytest.fixture
def make(tmp_path, sandbox):
    """Factory: an app over a MiniCache on fakes (its own database); all closed at teardown."""
    made: list[Rig] = []

    def factory(
        config: ServerConfig | None = None,
        *,
        target: FakeTarget | None = None,
        store: SQLiteStore | None = None,
        **engine_config,
    ) -> Rig:
        store = store or SQLiteStore(tmp_path / f"mc{len(made)}.db")
        engine_config.setdefault(
            "audit_rate", 0.0
        )  # random background audits would change the counts tested here
        engine_config.setdefault(
            "verify", VerifyConfig(probation=0)
        )  # nor probation (tests/hit/test_probation.py)
        engine_config.setdefault(
            "build_early", 0
        )  # builds at build_after; early: tests/build/test_admission.py
        target = target or FakeTarget()
        mc = MiniCache(
            target,
            FakeSmall(),
            store=store,
            embedder=HashEmbedder(),
            sandbox=sandbox,
            config=EngineConfig(background_builds=False, **engine_config),
        )
        app = create_app(mc, config or ServerConfig(rate_per_s=0))
        rig = Rig(mc, target, store, TestClient(app), app)
        made.append(rig)
        return rig

    yield factory
    for rig in made:
        rig.client.close()
        rig.mc.close()


@pytest.fixture
def rig(make) -> Rig:
    return make()


def chat_body(domain: Domain, values, **extra) -> dict:
    return {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": domain.ask(*values)}],
        **extra,
    }


def chat(
    rig: Rig,
    domain: Domain,
    values,
    *,
    key: str | None = None,
    headers: dict | None = None,
    **extra,
) -> dict:
    """One non-streaming chat request that must succeed with the right answer."""
    r = rig.client.post(
        "/v1/chat/completions",
        json=chat_body(domain, values, **extra),
        headers={**(bearer(key) if key else {}), **(headers or {})},
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert float(data["choices"][0]["message"]["content"]) == pytest.approx(
        domain.answer(*values), rel=1e-9
    )
    return data


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "code"}
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in response.text
    if code:
        assert error["code"] == code, error
    return error


def sse_events(text: str) -> list:
    assert text.endswith("\n\n")
    events = []
    for block in text.strip("\n").split("\n\n"):
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


# -- chat completions (TestClient) ---------------------------------------------------------------


def test_chat_completion_is_an_openai_object_and_the_fourth_request_hits(rig):
    routes = [chat(rig, CURRENT_RATIO, v)["minicache"]["route"] for v in CR_VALUES[:3]]
    assert routes == ["miss", "miss", "miss"]
    data = chat(rig, CURRENT_RATIO, CR_VALUES[3])
    assert data["object"] == "chat.completion" and data["id"].startswith("chatcmpl-")
    assert isinstance(data["created"], int) and data["model"] == "gpt-test"
    choice = data["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": "0.8"}
    info = data["minicache"]
    assert info["route"] == "hit" and info["entry_id"] and info["group"].startswith("grp_")
    assert info["variables"] == {"current_assets": 56000, "current_liabilities": 70000}
    assert {"route_s", "extract_s", "sandbox_s", "total_s"} <= set(info["timings"])
    assert info["tokens"] == {"target": 0, "small": 0}
    assert info["pinned"] == []  # read without the model: no value given to it
    assert data["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    miss = chat(rig, SIMPLE_INTEREST, SI_VALUES[0])
    assert miss["minicache"]["route"] == "miss"
    assert miss["usage"]["total_tokens"] == miss["minicache"]["tokens"]["target"] > 0
    assert (
        miss["usage"]["total_tokens"]
        == miss["usage"]["prompt_tokens"] + miss["usage"]["completion_tokens"]
    )


def test_earlier_messages_are_the_context_and_text_parts_are_joined(rig):
    table = "| company | Acme |\n| year | 2024 |"
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": table},
            {"role": "user", "content": "Noted."},  # an assistant turn would pass through
            {
                "role": "user",
                "content": [{"type": "text", "text": CURRENT_RATIO.ask(*CR_VALUES[0])}],
            },
        ],
    }
    r = rig.client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "1.5"
    prompt = rig.target.calls[-1].messages[1].content
    assert prompt.startswith(
        f"Context:\n{table}\n\nNoted.\n\nRequest:\n{CURRENT_RATIO.ask(*CR_VALUES[0])}"
    )
    example = rig.store.examples("default", r.json()["minicache"]["group"])[0]
    assert example.context == f"{table}\n\nNoted." and example.question == CURRENT_RATIO.ask(
        *CR_VALUES[0]
    )


@pytest.mark.parametrize("route", ["miss", "hit"])
def test_streaming_is_correct_sse_for_misses_and_hits(rig, route):
    if route == "hit":
        for values in CR_VALUES[:3]:
            chat(rig, CURRENT_RATIO, values)
    values = CR_VALUES[4]
    r = rig.client.post("/v1/chat/completions", json=chat_body(CURRENT_RATIO, values, stream=True))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(
        c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks
    )
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    # a miss streams the target's program as it is written, then the answer on a line of its own
    answer = content if route == "hit" else content.rsplit("\n\n", 1)[-1]
    assert answer == "3" and float(answer) == CURRENT_RATIO.answer(*values)
    last = chunks[-1]
    assert last["choices"][0]["delta"] == {} and last["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert last["minicache"]["route"] == route
    assert "minicache" not in chunks[0]


def test_stream_options_include_usage_adds_a_usage_chunk(rig):
    r = rig.client.post(
        "/v1/chat/completions",
        json=chat_body(
            SIMPLE_INTEREST, SI_VALUES[0], stream=True, stream_options={"include_usage": True}
        ),
    )
    chunks = sse_events(r.text)[:-1]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_cache_controls_in_body_metadata_and_headers(rig):
    assert (
        chat(rig, CURRENT_RATIO, CR_VALUES[0], minicache={"group": "body"})["minicache"]["group"]
        == "label:body"
    )
    assert (
        chat(rig, CURRENT_RATIO, CR_VALUES[1], metadata={"minicache_group": "meta"})["minicache"][
            "group"
        ]
        == "label:meta"
    )
    assert (
        chat(rig, CURRENT_RATIO, CR_VALUES[2], headers={"X-MiniCache-Group": "hdr"})["minicache"][
            "group"
        ]
        == "label:hdr"
    )
    # the body's minicache object wins over metadata, which wins over headers
    both = chat(
        rig,
        CURRENT_RATIO,
        CR_VALUES[3],
        minicache={"group": "body"},
        metadata={"minicache_group": "meta"},
        headers={"X-MiniCache-Group": "hdr"},
    )
    assert both["minicache"]["group"] == "label:body"

    for values in CR_VALUES[4:6]:
        chat(rig, CURRENT_RATIO, values, minicache={"group": "body"})
    assert (
        chat(rig, CURRENT_RATIO, CR_VALUES[6], minicache={"group": "body"})["minicache"]["route"]
        == "hit"
    )
    assert (
        chat(
            rig,
            CURRENT_RATIO,
            CR_VALUES[7],
            minicache={"group": "body", "no_cache": True},
        )["minicache"]["route"]
        == "miss"
    )
    assert (
        chat(
            rig,
            CURRENT_RATIO,
            CR_VALUES[7],
            minicache={"group": "body"},
            headers={"X-MiniCache-Force-Refresh": "1"},
        )["minicache"]["route"]
        == "miss"
    )
    assert (
        chat(
            rig,
            CURRENT_RATIO,
            CR_VALUES[7],
            minicache={"group": "body"},
            metadata={"minicache_no_cache": "true"},
        )["minicache"]["route"]
        == "miss"
    )
    before = rig.store.counters("default")
    examples = len(rig.store.examples("default", "label:body"))
    chat(
        rig,
        CURRENT_RATIO,
        CR_VALUES[8],
        minicache={"group": "body"},
        headers={"X-MiniCache-No-Store": "1", "X-MiniCache-No-Cache": "1"},
    )
    assert rig.store.counters("default") == before
    assert len(rig.store.examples("default", "label:body")) == examples


def test_bad_cache_controls_are_400(rig):
    body = chat_body(CURRENT_RATIO, CR_VALUES[0], minicache={"no_cache": "maybe"})
    r = rig.client.post("/v1/chat/completions", json=body)
    assert_error(r, 400, "invalid_type")
    r = rig.client.post(
        "/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[0], minicache={"grup": "x"})
    )
    assert_error(r, 400)
    r = rig.client.post(
        "/v1/chat/completions",
        json=chat_body(CURRENT_RATIO, CR_VALUES[0]),
        headers={"X-MiniCache-No-Store": "perhaps"},
    )
    assert assert_error(r, 400, "invalid_type")["param"] == "x-minicache-no-store"


def test_structured_requests_are_served_by_stepcache_with_their_steps(make):
    from minicache.stepcache import linear, parse

    class StepTarget(
        FakeTarget
    ):  # answers StepCache's prompts with solver steps, programs as before
        def _reply(self, messages, options):
            if "linear equations" not in messages[0].content:
                return super()._reply(messages, options)
            steps = linear.solver_steps(parse(messages[-1].content.split("\n\n")[0]))
            return (
                "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps[:-1])) + "\n" + steps[-1]
            )

    rig = make(target=StepTarget())
    ask = "Solve for {v}: {eq}. Show your work as numbered steps, one per line, and end with the line '{v} = <value>'."

    def post(content, **extra):
        r = rig.client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": content}], **extra},
        )
        assert r.status_code == 200, r.text
        return r.json()

    first = post(ask.format(v="x", eq="3x + 5 = 20"))
    second = post(ask.format(v="y", eq="7y + 4 = 39"))
    assert (
        first["minicache"]["route"] == "step-skip" and second["minicache"]["route"] == "step-reuse"
    )
    assert second["choices"][0]["message"]["content"].endswith("\ny = 5")
    assert second["minicache"]["verified"] is True and second["minicache"]["steps"][-1] == "y = 5"
    # the program cache can be asked for explicitly; a bad mode is a 400
    assert (
        "steps"
        not in post(CURRENT_RATIO.ask(*CR_VALUES[0]), minicache={"mode": "program"})["minicache"]
    )
    body = chat_body(CURRENT_RATIO, CR_VALUES[0], minicache={"mode": "steps"})
    r = rig.client.post("/v1/chat/completions", json=body)
    assert_error(r, 400, "invalid_value")
    r = rig.client.post(
        "/v1/chat/completions",
        json=chat_body(CURRENT_RATIO, CR_VALUES[0], minicache={"mode": "step"}),
    )
    assert_error(r, 400)


# -- native API ---------------------------------------------------------------------------------


def test_native_solve_returns_the_solve_result(rig):
    r = rig.client.post(
        "/v1/solve",
        json={
            "question": CURRENT_RATIO.ask(*CR_VALUES[0]),
            "context": {"co": "Acme"},
            "group": "cr",
        },
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert set(data) == {
        "answer",
        "route",
        "group",
        "entry_id",
        "program",
        "variables",
        "timings",
        "tokens",
        "similarity",
        "extraction",
        "pinned",
        "fallback_reason",
        "answer_text",
        "output",
        "steps",
        "verified",
        "solver_fallback",
        "reused_from",  # StepCache's, empty here
        "lock_wait_s",
        "passthrough_reason",  # set only where a chat request is forwarded
    }
    assert (data["answer"], data["answer_text"], data["route"], data["group"]) == (
        1.5,
        "1.5",
        "miss",
        "label:cr",
    )
    assert "def solve(" in data["program"]
    for values in CR_VALUES[1:3]:
        rig.client.post("/v1/solve", json={"question": CURRENT_RATIO.ask(*values), "group": "cr"})
    hit = rig.client.post(
        "/v1/solve", json={"question": CURRENT_RATIO.ask(*CR_VALUES[3]), "group": "cr"}
    ).json()
    assert hit["route"] == "hit" and hit["answer"] == pytest.approx(0.8)
    refreshed = rig.client.post(
        "/v1/solve",
        json={"question": CURRENT_RATIO.ask(*CR_VALUES[3]), "group": "cr", "force_refresh": True},
    ).json()
    assert refreshed["route"] == "miss"
    assert_error(rig.client.post("/v1/solve", json={"context": "x"}), 400)
    assert_error(rig.client.post("/v1/solve", json={"question": "   "}), 400, "invalid_request")
    assert_error(rig.client.post("/v1/solve", json={"question": 5}), 400, "invalid_request")
    assert_error(rig.client.post("/v1/solve", json={"question": "q", "no_store": "perhaps"}), 400)
    assert_error(rig.client.post("/v1/solve", json={"question": "q", "colour": "red"}), 400)


# -- auth and tenants ---------------------------------------------------------------------------


def test_auth_401_and_403(make):
    rig = make(AUTH)
    c = rig.client
    body = chat_body(CURRENT_RATIO, CR_VALUES[0])
    error = assert_error(c.post("/v1/chat/completions", json=body), 401, "missing_api_key")
    assert error["type"] == "authentication_error"
    r = c.post("/v1/chat/completions", json=body, headers=bearer("sk-not-a-real-key"))
    assert_error(r, 401, "invalid_api_key")
    assert r.headers["www-authenticate"] == "Bearer"
    assert_error(
        c.post("/v1/chat/completions", json=body, headers={"Authorization": "Basic abc"}), 401
    )
    assert c.post("/v1/chat/completions", json=body, headers=bearer(KEY_A)).status_code == 200
    # an admin-only key has no tenant to serve
    assert_error(
        c.post("/v1/chat/completions", json=body, headers=bearer(KEY_ADMIN)), 403, "no_tenant"
    )
    # admin endpoints: 401 without a key, 403 with a tenant key, 200 with an admin key
    assert_error(c.get("/admin/stats"), 401)
    error = assert_error(c.get("/admin/stats", headers=bearer(KEY_A)), 403, "admin_required")
    assert error["type"] == "permission_error"
    assert c.get("/admin/stats", headers=bearer(KEY_ADMIN)).status_code == 200
    assert c.get("/admin/stats", headers=bearer(KEY_OPS)).status_code == 200
    assert c.post("/v1/chat/completions", json=body, headers=bearer(KEY_OPS)).status_code == 200
    # /metrics needs an admin key when auth is on; /health never does
    assert_error(c.get("/metrics"), 401)
    assert_error(c.get("/metrics", headers=bearer(KEY_B)), 403)
    assert c.get("/metrics", headers=bearer(KEY_ADMIN)).status_code == 200
    assert c.get("/health").status_code == 200


def test_without_api_keys_auth_is_off_everything_is_tenant_default_and_admin_stays_closed(
    make, caplog
):
    with caplog.at_level("WARNING", logger="minicache.server"):
        rig = make(ServerConfig(rate_per_s=0))
    assert "authentication is OFF" in caplog.text and "admin endpoints are closed" in caplog.text
    chat(rig, CURRENT_RATIO, CR_VALUES[0], key="sk-anything-at-all")
    chat(rig, CURRENT_RATIO, CR_VALUES[1])
    assert rig.mc.stats("default")["requests"] == 2
    # no admin key configured: the admin endpoints are never open, least of all /admin/import
    assert_error(rig.client.get("/admin/stats"), 401, "missing_api_key")
    assert_error(rig.client.post("/admin/import", json=[]), 401)
    assert_error(
        rig.client.get("/admin/stats", headers=bearer("sk-anything-at-all")), 403, "admin_required"
    )
    assert (
        rig.client.get("/metrics").status_code == 200
    )  # no keys at all: metrics stay readable on loopback


def test_admin_keys_without_api_keys_still_protect_admin(make):
    rig = make(ServerConfig(admin_keys={KEY_ADMIN}, rate_per_s=0))
    chat(rig, CURRENT_RATIO, CR_VALUES[0])
    assert_error(rig.client.get("/admin/stats"), 401)
    assert_error(rig.client.get("/admin/stats", headers=bearer("sk-someone-else")), 403)
    assert rig.client.get("/admin/stats", headers=bearer(KEY_ADMIN)).json()["requests"] == 1


def test_tenants_see_only_their_own_entries(make):
    rig = make(AUTH)
    c = rig.client
    routes = [chat(rig, CURRENT_RATIO, v, key=KEY_A)["minicache"]["route"] for v in CR_VALUES[:4]]
    assert routes == ["miss", "miss", "miss", "hit"]
    b = chat(rig, CURRENT_RATIO, CR_VALUES[3], key=KEY_B)
    assert b["minicache"]["route"] == "miss" and b["minicache"]["entry_id"] is None
    admin = bearer(KEY_ADMIN)
    a_entries = c.get("/admin/entries", params={"tenant": "a"}, headers=admin).json()["data"]
    assert len(a_entries) == 1 and a_entries[0]["tenant"] == "a"
    assert c.get("/admin/entries", params={"tenant": "b"}, headers=admin).json()["data"] == []
    assert c.get("/admin/entries", headers=admin).json()["data"] == []  # tenant "default"
    assert_error(
        c.get(f"/admin/entries/{a_entries[0]['id']}", params={"tenant": "b"}, headers=admin), 404
    )
    assert (
        c.get(
            f"/admin/entries/{a_entries[0]['id']}", params={"tenant": "a"}, headers=admin
        ).status_code
        == 200
    )
    stats_b = c.get("/admin/stats", params={"tenant": "b"}, headers=admin).json()
    assert (stats_b["requests"], stats_b["hits"], stats_b["entries_active"]) == (1, 0, 0)
    assert rig.mc.stats("a")["hits"] == 1


# -- admin --------------------------------------------------------------------------------------


def test_admin_entries_groups_invalidate_and_delete(make):
    rig = make(AUTH)
    c, admin = rig.client, bearer(KEY_ADMIN)
    for values in CR_VALUES[:3]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A, minicache={"group": "cr"})
    for values in SI_VALUES[:3]:
        chat(rig, SIMPLE_INTEREST, values, key=KEY_A)
    q = {"tenant": "a"}
    groups = c.get("/admin/groups", params=q, headers=admin).json()["data"]
    assert sorted(g["n_examples"] for g in groups) == [3, 3]
    assert {g["label"] for g in groups} == {"cr", None}
    entries = c.get("/admin/entries", params={**q, "status": "active"}, headers=admin).json()[
        "data"
    ]
    assert len(entries) == 2
    cr = next(e for e in entries if e["group_id"] == "label:cr")
    si = next(e for e in entries if e["group_id"] != "label:cr")
    one = c.get(f"/admin/entries/{cr['id']}", params=q, headers=admin).json()
    assert one["program"] == cr["program"] and one["status"] == "active"

    r = c.post("/admin/invalidate", params=q, json={"group": "cr"}, headers=admin)
    assert r.json() == {"tenant": "a", "invalidated": 1}
    assert (
        c.get(f"/admin/entries/{cr['id']}", params=q, headers=admin).json()["status"] == "evicted"
    )
    assert (
        chat(rig, CURRENT_RATIO, CR_VALUES[3], key=KEY_A, minicache={"group": "cr"})["minicache"][
            "route"
        ]
        == "miss"
    )
    assert (
        c.post("/admin/invalidate", params=q, json={"entry": si["id"]}, headers=admin).json()[
            "invalidated"
        ]
        == 1
    )
    assert chat(rig, SIMPLE_INTEREST, SI_VALUES[3], key=KEY_A)["minicache"]["route"] == "miss"
    assert_error(c.post("/admin/invalidate", params=q, json={}, headers=admin), 400)
    assert_error(
        c.post("/admin/invalidate", params=q, json={"group": "x", "entry": "y"}, headers=admin), 400
    )
    assert_error(c.post("/admin/invalidate", params=q, json={"group": 5}, headers=admin), 400)

    r = c.delete(f"/admin/entries/{si['id']}", params=q, headers=admin)
    assert r.json() == {"id": si["id"], "deleted": True}
    assert_error(
        c.get(f"/admin/entries/{si['id']}", params=q, headers=admin), 404, "entry_not_found"
    )
    assert_error(c.delete(f"/admin/entries/{si['id']}", params=q, headers=admin), 404)
    assert_error(c.get("/admin/entries", params={**q, "status": "weird"}, headers=admin), 400)


def test_export_import_round_trip_into_another_tenant(make):
    rig = make(AUTH)
    c, admin = rig.client, bearer(KEY_ADMIN)
    for values in CR_VALUES[:3]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A)
    exported = c.get("/admin/export", params={"tenant": "a"}, headers=admin).json()
    assert len(exported) == 1 and len(exported[0]["examples"]) == 3
    r = c.post("/admin/import", params={"tenant": "b"}, json=exported, headers=admin)
    assert r.status_code == 200 and r.json() == {"tenant": "b", "imported": 1}
    calls = rig.target.miss_calls
    hit = chat(rig, CURRENT_RATIO, CR_VALUES[3], key=KEY_B)
    assert hit["minicache"]["route"] == "hit" and rig.target.miss_calls == calls
    imported = c.get("/admin/entries", params={"tenant": "b"}, headers=admin).json()["data"]
    assert [e["program"] for e in imported] == [exported[0]["program"]] and imported[0][
        "id"
    ] != exported[0]["id"]


@pytest.mark.parametrize(
    "bad",
    [
        {"group_id": "g", "template": [], "program": "not python at all ("},  # engine's own check
        {"group_id": {"not": "a string"}},  # would fail only while writing
        {"rules": ["not", "an", "object"]},  # would raise AttributeError in the engine
        {"program": 5},
        {"examples": [{"question": "q", "context": {"an": "object"}}]},
        "not an object",
    ],
)
def test_invalid_import_is_400_and_writes_nothing(make, bad):
    rig = make(AUTH)
    c, admin = rig.client, bearer(KEY_ADMIN)
    for values in CR_VALUES[:3]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A)
    exported = c.get("/admin/export", params={"tenant": "a"}, headers=admin).json()
    broken = {**exported[0], **bad} if isinstance(bad, dict) else bad
    r = c.post("/admin/import", params={"tenant": "b"}, json=[exported[0], broken], headers=admin)
    assert_error(r, 400, "invalid_entries")
    assert "entry 1" in r.json()["error"]["message"]
    assert rig.store.list_entries("b") == [] and rig.store.list_groups("b") == []


def test_import_needs_a_json_list(make):
    rig = make(AUTH)
    admin = bearer(KEY_ADMIN)
    assert_error(rig.client.post("/admin/import", json={"entries": []}, headers=admin), 400)
    assert_error(
        rig.client.post("/admin/import", content=b"[{", headers=admin), 400, "invalid_json"
    )
    assert rig.client.post("/admin/import", json=[], headers=admin).json()["imported"] == 0


def test_freeze_stops_builds_and_unfreeze_resumes_them(make):
    rig = make(AUTH)
    c, admin = rig.client, bearer(KEY_ADMIN)
    assert c.post("/admin/freeze", json={"frozen": True}, headers=admin).json() == {"frozen": True}
    assert rig.mc.config.frozen is True and c.get("/health").json()["frozen"] is True
    routes = [chat(rig, CURRENT_RATIO, v, key=KEY_A)["minicache"]["route"] for v in CR_VALUES[:5]]
    assert routes == ["miss"] * 5
    assert rig.store.list_entries("a") == []
    assert c.get("/admin/stats", params={"tenant": "a"}, headers=admin).json()["frozen"] is True
    assert c.post("/admin/freeze", json={"frozen": False}, headers=admin).json() == {
        "frozen": False
    }
    assert (
        chat(rig, CURRENT_RATIO, CR_VALUES[5], key=KEY_A)["minicache"]["route"] == "miss"
    )  # builds now
    assert len(rig.store.list_entries("a", "active")) == 1
    assert chat(rig, CURRENT_RATIO, CR_VALUES[6], key=KEY_A)["minicache"]["route"] == "hit"
    assert_error(c.post("/admin/freeze", json={"frozen": "yes"}, headers=admin), 400)
    assert_error(c.post("/admin/freeze", json={"frozen": True}, headers=bearer(KEY_A)), 403)


# -- limits and errors --------------------------------------------------------------------------


def test_body_over_the_limit_is_413(make):
    rig = make(ServerConfig(max_body_bytes=4096, rate_per_s=0))
    big = chat_body(CURRENT_RATIO, CR_VALUES[0])
    big["messages"].insert(0, {"role": "system", "content": "x" * 5000})
    error = assert_error(
        rig.client.post("/v1/chat/completions", json=big), 413, "request_too_large"
    )
    assert "4,096" in error["message"]

    def chunks():  # no Content-Length: the limit is enforced while reading
        data = json.dumps(big).encode()
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    assert_error(rig.client.post("/v1/chat/completions", content=chunks()), 413)
    assert rig.mc.stats()["requests"] == 0
    assert chat(rig, CURRENT_RATIO, CR_VALUES[0])["choices"][0]["message"]["content"] == "1.5"


def test_rate_limit_per_key_is_429_with_retry_after(make):
    rig = make(ServerConfig(api_keys={KEY_A: "a", KEY_B: "b"}, rate_per_s=0.5, burst=2))
    for values in CR_VALUES[:2]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A)
    r = rig.client.post(
        "/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[2]), headers=bearer(KEY_A)
    )
    error = assert_error(r, 429, "rate_limit_exceeded")
    assert error["type"] == "rate_limit_error"
    assert int(r.headers["retry-after"]) >= 1
    chat(rig, CURRENT_RATIO, CR_VALUES[2], key=KEY_B)  # another key has its own bucket
    assert rig.mc.stats("a")["requests"] == 2


def test_token_bucket_refills_at_the_configured_rate():
    limiter = RateLimiter(rate_per_s=2.0, burst=3)
    assert [limiter.acquire("k", now=100.0) for _ in range(3)] == [None, None, None]
    assert limiter.acquire("k", now=100.0) == pytest.approx(0.5)
    assert limiter.acquire("k", now=100.5) is None
    assert limiter.acquire("other", now=100.5) is None
    assert RateLimiter(rate_per_s=0, burst=1).acquire("k") is None


@pytest.mark.parametrize(
    "body,code",
    [
        (b"{not json", "invalid_json"),
        (b"", "invalid_json"),
        (b"[1, 2]", "invalid_type"),
        (b'{"model": "m"}', "missing_required_parameter"),
        (b'{"messages": "hello"}', "invalid_type"),
        (
            b'{"messages": [{"role": "system", "content": "only a system message"}]}',
            "missing_user_message",
        ),
        (b'{"messages": [{"role": "user", "content": 5}]}', "invalid_type"),
        (b'{"messages": [{"role": "wizard", "content": "hi"}]}', "invalid_value"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', "invalid_type"),
        (b'{"messages": [{"role": "user", "content": "hi"}], "n": 0}', "invalid_value"),
        (
            b'{"messages": [{"role": "user", "content": "   "}]}',
            "invalid_request",
        ),  # empty question (engine)
        (b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}', "invalid_request"),
    ],
    ids=[
        "malformed",
        "empty-body",
        "not-object",
        "no-messages",
        "messages-type",
        "no-user-message",
        "content-type",
        "role",
        "stream-type",
        "n",
        "empty-question",
        "nul",
    ],
)
def test_bad_requests_are_400_with_openai_error_json(rig, body, code):
    r = rig.client.post(
        "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}
    )
    error = assert_error(r, 400, code)
    assert error["type"] == "invalid_request_error"
    assert rig.mc.stats()["requests"] == 0


def test_target_failure_is_502_and_unexpected_errors_are_500_without_details(make):
    rig = make(target=FakeTarget(mode="raise"))
    r = rig.client.post("/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[0]))
    assert_error(r, 502, "solve_failed")
    assert rig.store.counters("default")["errors"] == 1

    def explode(*args, **kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    rig.mc.solve = explode
    r = rig.client.post("/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[0]))
    error = assert_error(r, 500, "internal_error")
    assert (
        "secret" not in r.text and "RuntimeError" not in r.text and error["type"] == "server_error"
    )


def test_unknown_paths_and_methods_get_error_json(rig):
    assert_error(rig.client.get("/v2/nothing"), 404)
    assert_error(rig.client.get("/v1/chat/completions"), 405)


class GatedTarget(FakeTarget):
    """A target that holds each call until the test releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def complete(self, messages, options=None):
        self.entered.set()
        assert self.release.wait(30)
        return super().complete(messages, options)


def test_requests_beyond_max_inflight_get_503(make):
    target = GatedTarget()
    rig = make(ServerConfig(max_inflight=1, rate_per_s=0), target=target)
    results: list[httpx.Response] = []
    with (
        BackgroundServer(rig.app) as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http,
    ):
        first = threading.Thread(
            target=lambda: results.append(
                http.post("/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[0]))
            )
        )
        first.start()
        try:
            assert target.entered.wait(10)
            r = http.post("/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[1]))
            error = assert_error(r, 503, "overloaded")
            assert error["type"] == "server_error" and r.headers["retry-after"] == "1"
            assert http.get("/health").status_code == 200  # probes are not limited
        finally:
            target.release.set()
            first.join(30)
        assert results[0].status_code == 200
        assert (
            http.post(
                "/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[1])
            ).status_code
            == 200
        )


# -- metrics and health -------------------------------------------------------------------------


def test_metrics_count_what_was_served(rig):
    tokens = 0
    for values in CR_VALUES[:5]:
        tokens += chat(rig, CURRENT_RATIO, values)["minicache"]["tokens"]["target"]
    rig.client.post("/v1/solve", json={"question": SIMPLE_INTEREST.ask(*SI_VALUES[0])})
    rig.client.post("/v1/chat/completions", content=b"{bad")
    rig.client.post("/v1/solve", json={"question": ""})
    text = rig.client.get("/metrics").text
    assert rig.client.get("/metrics").headers["content-type"].startswith("text/plain")
    for name in (
        "minicache_requests_total",
        "minicache_stage_seconds_bucket",
        "minicache_target_tokens_total",
        "minicache_target_tokens_saved_total",
        "minicache_http_requests_total",
        "minicache_http_errors_total",
        "minicache_builds_total",
        "minicache_hit_rate",
        "minicache_sandbox_failures_total",
        "minicache_sandbox_runs_total",
        "minicache_engine_requests_total",
        "minicache_inflight_requests",
        "minicache_frozen",
        "minicache_background_yields_total",
    ):
        assert f"\n{name}" in text, name
    assert sample_value(text, "minicache_requests_total") == 7
    assert (
        sample_value(text, "minicache_requests_total", {"endpoint": "chat", "route": "miss"}) == 3
    )
    assert sample_value(text, "minicache_requests_total", {"endpoint": "chat", "route": "hit"}) == 2
    assert (
        sample_value(text, "minicache_requests_total", {"endpoint": "solve", "route": "miss"}) == 1
    )
    assert (
        sample_value(text, "minicache_requests_total", {"endpoint": "solve", "route": "invalid"})
        == 1
    )
    si_tokens = rig.mc.stats()["target_tokens"] - tokens
    assert (
        sample_value(text, "minicache_target_tokens_total", {"tenant": "default"})
        == tokens + si_tokens
    )
    assert sample_value(text, "minicache_target_tokens_saved_total") == pytest.approx(
        2 * tokens / 3
    )
    assert (
        sample_value(text, "minicache_stage_seconds_count", {"stage": "total", "route": "hit"}) == 2
    )
    assert (
        sample_value(text, "minicache_stage_seconds_count", {"stage": "extract", "route": "hit"})
        == 2
    )
    assert sample_value(text, "minicache_stage_seconds_count", {"stage": "target"}) == 4
    assert sample_value(text, "minicache_http_errors_total", {"status": "400"}) == 2
    assert (
        sample_value(
            text, "minicache_http_requests_total", {"path": "/v1/chat/completions", "status": "200"}
        )
        == 5
    )
    assert sample_value(text, "minicache_engine_requests_total", {"tenant": "default"}) == 6
    assert sample_value(text, "minicache_engine_hits_total", {"tenant": "default"}) == 2
    assert sample_value(text, "minicache_builds_total", {"tenant": "default", "outcome": "ok"}) == 1
    assert (
        sample_value(text, "minicache_builds_total", {"tenant": "default", "outcome": "failed"})
        == 0
    )
    assert (
        sample_value(text, "minicache_builds_total", {"tenant": "default", "outcome": "declined"})
        == 0
    )
    assert sample_value(text, "minicache_hit_rate", {"tenant": "default"}) == pytest.approx(2 / 6)
    # The rig's engine audits nothing and its fake small model's values pass every hit check.
    assert sample_value(text, "minicache_engine_audits_total", {"tenant": "default"}) == 0
    assert sample_value(text, "minicache_engine_hit_refusals_total", {"tenant": "default"}) == 0
    assert sample_value(text, "minicache_entries_demoted", {"tenant": "default"}) == 0


def test_metrics_registries_are_per_app(make):
    one, two = make(), make()
    chat(one, CURRENT_RATIO, CR_VALUES[0])
    assert sample_value(one.client.get("/metrics").text, "minicache_requests_total") == 1
    assert sample_value(two.client.get("/metrics").text, "minicache_requests_total") == 0


def test_public_metrics_option(make):
    rig = make(ServerConfig(api_keys={KEY_A: "a"}, public_metrics=True, rate_per_s=0))
    assert rig.client.get("/metrics").status_code == 200


def test_health_reports_the_process_and_ready_the_store(rig, monkeypatch):
    assert rig.client.get("/health").json() == {
        "status": "ok",
        "frozen": False,
        "version": rig.client.get("/health").json()["version"],
    }
    assert rig.client.get("/ready").json()["store"] == "ok"

    def broken(tenant):
        raise OSError("disk gone")

    monkeypatch.setattr(rig.mc.store, "counters", broken)
    r = rig.client.get("/ready")
    assert r.status_code == 503 and r.json()["store"] == "unreachable" and "disk" not in r.text
    assert rig.client.get("/health").status_code == 200  # liveness: the process is up


def test_the_server_is_ready_only_once_every_tenants_routing_index_is_loaded(make):
    """A restarted server (a new engine on the same store) loads tenant a's history at start-up:
    /ready says "warming" (503) until then; tenant b is served meanwhile; a's first request after
    ready reads no history."""
    import time

    first = make(AUTH)
    group = chat(first, CURRENT_RATIO, CR_VALUES[0], key=KEY_A)["minicache"]["group"]
    rig = make(AUTH, store=SQLiteStore(first.store.path))
    since = rig.store.examples_since
    reads: list[tuple[str, int]] = []
    entered, release = threading.Event(), threading.Event()

    def gated(tenant: str, cursor: int, limit: int = 10_000):
        reads.append((tenant, cursor))
        if tenant == "a" and cursor == 0:  # the warm-up's load of tenant a, held until released
            entered.set()
            assert release.wait(10)
        return since(tenant, cursor, limit)

    rig.store.examples_since = gated  # type: ignore[method-assign]
    with TestClient(rig.app) as client:  # runs the lifespan, as a server start does
        try:
            assert entered.wait(10)
            r = client.get("/ready")
            assert r.status_code == 503 and r.json()["failing"] == ["routing"]
            assert r.json()["routing"] == {
                "status": "warming",
                "tenants": 4,
                "loaded": 0,
                "failed": 0,
            }  # a, b, ops, default
            served = client.post(
                "/v1/chat/completions",
                json=chat_body(SIMPLE_INTEREST, SI_VALUES[0]),
                headers=bearer(KEY_B),
            )
            assert served.status_code == 200, served.text
        finally:
            release.set()
        deadline = time.monotonic() + 10
        while (r := client.get("/ready")).status_code != 200:
            assert r.json()["failing"] == ["routing"] and time.monotonic() < deadline
            time.sleep(0.02)
        assert r.json()["status"] == "ok"
        reads.clear()
        r = client.post(
            "/v1/chat/completions",
            json=chat_body(CURRENT_RATIO, CR_VALUES[1]),
            headers=bearer(KEY_A),
        )
        assert r.status_code == 200 and r.json()["minicache"]["group"] == group
        assert ("a", 0) not in reads  # its first request after start-up read no history


# -- the official openai client against a real uvicorn server ------------------------------------


@pytest.fixture
def live(make):
    rig = make(AUTH)
    with BackgroundServer(rig.app) as server, httpx.Client(trust_env=False, timeout=30) as http:

        def client(key: str = KEY_A) -> openai.OpenAI:
            return openai.OpenAI(
                base_url=f"{server.url}/v1", api_key=key, http_client=http, max_retries=0
            )

        yield rig, client, server


def test_openai_client_non_streaming(live):
    rig, client, _ = live
    routes = []
    for values in SI_VALUES[:4]:
        completion = client().chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "You are a calculator."},
                {"role": "user", "content": SIMPLE_INTEREST.ask(*values)},
            ],
        )
        assert completion.object == "chat.completion" and completion.model == "gpt-4o-mini"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.choices[0].message.role == "assistant"
        assert float(completion.choices[0].message.content) == pytest.approx(
            SIMPLE_INTEREST.answer(*values)
        )
        assert completion.usage.total_tokens >= 0
        routes.append(completion.model_extra["minicache"]["route"])
    assert routes == ["miss", "miss", "miss", "hit"]
    assert [m.id for m in client().models.list()] == ["minicache"]


def test_openai_client_streaming(live):
    rig, client, _ = live
    for values in CR_VALUES[:3]:
        client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": CURRENT_RATIO.ask(*values)}]
        )
    for values, route in ((CR_VALUES[3], "hit"), (CR_VALUES[4], "hit")):
        stream = client().chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": CURRENT_RATIO.ask(*values)}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert float(text) == pytest.approx(CURRENT_RATIO.answer(*values))
        finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
        assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
        assert finals[0].model_extra["minicache"]["route"] == route
        assert chunks[0].choices[0].delta.role == "assistant"
        assert chunks[-1].usage is not None and chunks[-1].choices == []
    miss = client().chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": SIMPLE_INTEREST.ask(*SI_VALUES[0])}],
        stream=True,
    )
    chunks = list(miss)
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert content.startswith("Here is the program.") and content.endswith("\n\n1800")
    assert (
        chunks[-1].choices[0].finish_reason == "stop"
        and chunks[-1].model_extra["minicache"]["route"] == "miss"
    )


def test_openai_client_cache_controls_via_extra_body_metadata_and_headers(live):
    rig, client, _ = live

    def ask(values, **kwargs):
        completion = client().chat.completions.create(
            model="m", messages=[{"role": "user", "content": CURRENT_RATIO.ask(*values)}], **kwargs
        )
        assert float(completion.choices[0].message.content) == pytest.approx(
            CURRENT_RATIO.answer(*values)
        )
        return completion.model_extra["minicache"]

    assert ask(CR_VALUES[0], extra_body={"minicache": {"group": "eb"}})["group"] == "label:eb"
    assert ask(CR_VALUES[1], extra_headers={"X-MiniCache-Group": "eb"})["group"] == "label:eb"
    assert ask(CR_VALUES[2], metadata={"minicache_group": "eb"})["group"] == "label:eb"
    assert ask(CR_VALUES[3], extra_body={"minicache": {"group": "eb"}})["route"] == "hit"
    assert (
        ask(CR_VALUES[4], extra_body={"minicache": {"group": "eb", "no_cache": True}})["route"]
        == "miss"
    )
    assert (
        ask(
            CR_VALUES[4],
            extra_body={"minicache": {"group": "eb"}},
            extra_headers={"X-MiniCache-No-Cache": "1"},
        )["route"]
        == "miss"
    )
    before = rig.store.counters("a")
    assert (
        ask(CR_VALUES[5], extra_body={"minicache": {"group": "eb", "no_store": True}})["route"]
        == "hit"
    )
    assert rig.store.counters("a") == before


def test_openai_client_sees_errors_as_openai_exceptions(live):
    rig, client, _ = live
    with pytest.raises(openai.AuthenticationError) as info:
        client("sk-wrong-key-0000").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
    with pytest.raises(openai.BadRequestError) as info:
        client().chat.completions.create(
            model="m", messages=[{"role": "system", "content": "no question"}]
        )
    assert info.value.code == "missing_user_message"


def test_server_config_from_toml_and_env(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text(
        'admin_keys = ["sk-admin-xxxxxxxx"]\npublic_metrics = true\n\n[api_keys]\n'
        '"sk-a-xxxxxxxxxxxx" = "a"\n\n[limits]\nmax_body_bytes = 2048\nrate_per_s = 5\nburst = 7\n',
        encoding="utf-8",
    )
    config = load_server_config(path, env={})
    assert config.api_keys == {"sk-a-xxxxxxxxxxxx": "a"} and config.admin_keys == {
        "sk-admin-xxxxxxxx"
    }
    assert (config.max_body_bytes, config.rate_per_s, config.burst, config.max_inflight) == (
        2048,
        5.0,
        7,
        64,
    )
    assert config.public_metrics is True and config.auth_enabled
    env = {"MINICACHE_SERVER_MAX_INFLIGHT": "8", "MINICACHE_SERVER_API_KEYS": "sk-b-yyyyyyyyyyyy=b"}
    config = load_server_config(path, env=env)
    assert config.max_inflight == 8 and config.api_keys == {"sk-b-yyyyyyyyyyyy": "b"}
    assert load_server_config(None, env={}) == ServerConfig()
    path.write_text("[limits]\nmax_bodybytes = 1\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_server_config(path, env={})
    with pytest.raises(ConfigError):
        ServerConfig(api_keys={"short": "a"})


def test_live_server_refuses_a_large_body_with_413(live):
    rig, client, server = live
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "x" * (1 << 20)},
            {"role": "user", "content": CURRENT_RATIO.ask(*CR_VALUES[0])},
        ],
    }
    with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http:
        assert_error(
            http.post("/v1/chat/completions", json=body, headers=bearer(KEY_A)),
            413,
            "request_too_large",
        )
        assert http.get("/health").status_code == 200
    with pytest.raises(openai.APIStatusError) as info:
        client().chat.completions.create(**body)
    assert info.value.status_code == 413
    assert rig.mc.stats("a")["requests"] == 0


def test_serve_builds_the_engine_runs_uvicorn_and_closes_the_engine(make, monkeypatch, tmp_path):
    import uvicorn

    from minicache.server import serve

    rig = make()
    seen: dict = {}
    closed: list[bool] = []

    def fake_local(store, **kwargs):
        seen["store"] = store
        return rig.mc

    def fake_run(self, sockets=None):
        seen["uvicorn"] = self.config

    monkeypatch.setattr(MiniCache, "local", fake_local)
    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.setattr(rig.mc, "close", lambda: closed.append(True))
    path = tmp_path / "server.toml"
    path.write_text('[api_keys]\n"sk-a-xxxxxxxxxxxx" = "a"\n', encoding="utf-8")
    serve("127.0.0.1", 8123, str(tmp_path / "served.db"), str(path))
    assert seen["store"] == str(tmp_path / "served.db")
    config = seen["uvicorn"]
    assert (config.host, config.port) == ("127.0.0.1", 8123)
    assert (
        config.app.state.config.api_keys == {"sk-a-xxxxxxxxxxxx": "a"}
        and config.app.state.engine is rig.mc
    )
    assert closed == [True]


# -- hostile clients: a clear 4xx or a bounded 503, OpenAI-style, and nothing stored ----


def state_of(store: SQLiteStore, tenants=("default", "a", "b", " ", "\x00")) -> dict:
    """Everything a request could have changed: counters, entries (with hits and failures), groups."""
    return {
        t: (
            store.counters(t),
            sorted((e.id, e.status, e.hits, e.failures) for e in store.list_entries(t)),
            sorted((g.id, g.n_examples, g.build_failures) for g in store.list_groups(t)),
        )
        for t in tenants
    }


@pytest.mark.parametrize(
    "ask",
    [
        "Use 50000000 decimal places.",
        "Give 99999999999 decimal places.",
        "Use " + "9" * 5000 + " decimal places.",
    ],
    ids=["50M", "99999999999", "5000-digits"],
)
def test_absurd_precision_is_400_before_anything_is_stored(rig, ask):
    for values in CR_VALUES[:3]:  # a group with an entry: the request would hit
        chat(rig, CURRENT_RATIO, values)
    before = state_of(rig.store)
    question = f"{CURRENT_RATIO.ask(*CR_VALUES[3])} {ask}"
    for stream in (False, True):
        r = rig.client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": question}], "stream": stream},
        )
        assert "decimal places" in assert_error(r, 400, "invalid_request")["message"]
        assert len(r.content) < 1000
    assert_error(
        rig.client.post("/v1/solve", json={"question": question, "group": "new"}),
        400,
        "invalid_request",
    )
    assert state_of(rig.store) == before
    r = rig.client.post(
        "/v1/chat/completions",
        json={
            "messages": [
                {
                    "role": "user",
                    "content": f"{CURRENT_RATIO.ask(*CR_VALUES[3])} Use 3 decimal places.",
                }
            ]
        },
    )
    assert r.json()["choices"][0]["message"]["content"] == "0.800"


def test_streamed_chunks_are_rendered_as_the_client_reads_them():
    import inspect

    from minicache.engine import SolveResult, format_answer
    from minicache.server.openai_format import chat_chunks

    result = SolveResult(answer=1.5, route="miss", group="g", answer_text="x" * 6400)
    events = chat_chunks(result, "m")
    assert inspect.isgenerator(events)  # not a list built up front
    assert next(events).startswith("data: ") and sum(1 for _ in events) == 100 + 2
    assert len(format_answer(2.0, "Use 50000000 decimal places")) < 200  # the formatter caps it too


def test_nested_json_is_400_at_any_depth_beyond_the_limit(rig):
    before = state_of(rig.store)
    for depth in (65, 900, 5000):
        deep = "[" * depth + "]" * depth
        body = f'{{"messages": [{{"role": "user", "content": "{CURRENT_RATIO.ask(*CR_VALUES[0])}"}}], "x": {deep}}}'
        error = assert_error(
            rig.client.post(
                "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"}
            ),
            400,
            "invalid_json",
        )
        assert "nested" in error["message"]
        assert_error(
            rig.client.post("/v1/solve", content=f'{{"question": "q", "context": {deep}}}'), 400
        )
    assert state_of(rig.store) == before


@pytest.mark.parametrize("where", ["content", "model", "group", "context", "key"])
def test_lone_surrogates_are_400_and_count_nothing(rig, where):
    ok = CURRENT_RATIO.ask(*CR_VALUES[0]).replace('"', '\\"')
    bodies = {
        "content": f'{{"messages": [{{"role": "user", "content": "{ok} \\ud800"}}]}}',
        "model": f'{{"model": "m\\udfff", "messages": [{{"role": "user", "content": "{ok}"}}]}}',
        "group": f'{{"messages": [{{"role": "user", "content": "{ok}"}}], "minicache": {{"group": "g\\ud800"}}}}',
        "context": f'{{"messages": [{{"role": "system", "content": "\\ud800"}}, '
        f'{{"role": "user", "content": "{ok}"}}]}}',
        "key": f'{{"messages": [{{"role": "user", "content": "{ok}"}}], "metadata": {{"\\ud800": "x"}}}}',
    }
    before = state_of(rig.store)
    r = rig.client.post(
        "/v1/chat/completions",
        content=bodies[where].encode(),
        headers={"Content-Type": "application/json"},
    )
    assert "surrogate" in assert_error(r, 400, "invalid_json")["message"]
    assert state_of(rig.store) == before
    assert sample_value(rig.client.get("/metrics").text, "minicache_requests_total") == 0


def test_nul_and_blank_group_labels_are_400(rig):
    before = state_of(rig.store)
    for group in ("a\x00b", " ", "", "tab\tbed", "x" * 201):
        r = rig.client.post(
            "/v1/chat/completions",
            json=chat_body(CURRENT_RATIO, CR_VALUES[0], minicache={"group": group}),
        )
        assert assert_error(r, 400)["param"] == "minicache.group"
        assert_error(rig.client.post("/v1/solve", json={"question": "q", "group": group}), 400)
    r = rig.client.post(
        "/v1/chat/completions",
        json=chat_body(CURRENT_RATIO, CR_VALUES[0]),
        headers={"X-MiniCache-Group": " padded "},
    )
    assert_error(r, 400)
    assert state_of(rig.store) == before
    with pytest.raises(Exception, match="NUL"):  # the engine refuses it too, for library callers
        rig.mc.solve(CURRENT_RATIO.ask(*CR_VALUES[0]), group="a\x00b")


@pytest.mark.parametrize(
    "extra,param,code",
    [
        ({"max_tokens": -5}, "max_tokens", "invalid_value"),
        ({"max_tokens": 0}, "max_tokens", "invalid_value"),
        ({"temperature": "hot"}, "temperature", "invalid_type"),
        ({"temperature": 2.5}, "temperature", "invalid_value"),
        ({"n": True}, "n", "invalid_type"),
        ({"n": 0}, "n", "invalid_value"),
        ({"top_p": "1"}, "top_p", "invalid_type"),
        ({"stream": 1}, "stream", "invalid_type"),
        ({"seed": 1.5}, "seed", "invalid_type"),
        ({"stop": [1]}, "stop", "invalid_type"),
        ({"minicache": {"no_cache": "maybe"}}, "minicache.no_cache", "invalid_type"),
    ],
    ids=lambda v: str(v) if not isinstance(v, dict) else "-".join(v),
)
def test_openai_parameters_are_checked_as_openai_checks_them(rig, extra, param, code):
    r = rig.client.post(
        "/v1/chat/completions", json=chat_body(CURRENT_RATIO, CR_VALUES[0], **extra)
    )
    error = assert_error(r, 400, code)
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert rig.mc.stats()["requests"] == 0


def test_valid_openai_parameters_are_accepted(rig):
    chat(
        rig,
        CURRENT_RATIO,
        CR_VALUES[0],
        temperature=0,
        top_p=1,
        n=1,
        max_tokens=100,
        seed=7,
        stop=["\n"],
        presence_penalty=0.5,
        user="u",
        metadata={"k": "v"},
        tools=[],
        response_format={"type": "text"},
    )


@pytest.mark.parametrize("tenant", [" ", "\x00", "", "a\x00", " a", "x" * 201, "tab\there"])
def test_admin_tenant_must_be_a_name_someone_can_use(make, tenant):
    rig = make(AUTH)
    admin, q = bearer(KEY_ADMIN), {"tenant": tenant}
    for method, path, body in (
        ("GET", "/admin/entries", None),
        ("GET", "/admin/stats", None),
        ("GET", "/admin/groups", None),
        ("GET", "/admin/export", None),
        ("POST", "/admin/import", []),
        ("POST", "/admin/invalidate", {"group": "g"}),
        ("DELETE", "/admin/entries/ent_x", None),
    ):
        r = rig.client.request(method, path, params=q, json=body, headers=admin)
        assert assert_error(r, 400)["param"] == "tenant", (method, path)
    assert state_of(rig.store, tenants=(tenant,)) == {tenant: ({}, [], [])}
    assert tenant not in rig.client.app.state.server.seen_tenants


@pytest.mark.parametrize("value", ["²", "-1", "101", "abc", "1e2", "", "0x10"])
def test_export_examples_must_be_a_small_plain_integer(make, value):
    rig = make(AUTH)
    r = rig.client.get("/admin/export", params={"examples": value}, headers=bearer(KEY_ADMIN))
    assert assert_error(r, 400)["param"] == "examples"


def test_entry_ids_with_control_characters_are_400(make):
    rig = make(AUTH)
    admin = bearer(KEY_ADMIN)
    assert_error(rig.client.get("/admin/entries/a%00b", headers=admin), 400)
    assert_error(rig.client.delete("/admin/entries/a%00b", headers=admin), 400)
    assert_error(rig.client.post("/admin/invalidate", json={"entry": "a\x00b"}, headers=admin), 400)


@pytest.mark.parametrize(
    "bad",
    [
        {"hits": 10**30},
        {"failures": 2**63},
        {"hits": -1},
        {"group_id": "g\x00"},
        {"examples": [{"question": "q\x00", "answer": 1}]},
        "NaN",
        "Infinity",
    ],
    ids=[
        "hits-1e30",
        "failures-2**63",
        "hits-negative",
        "nul-group",
        "nul-question",
        "nan",
        "infinity",
    ],
)
def test_hostile_import_is_400_and_writes_nothing(make, bad):
    rig = make(AUTH)
    admin = bearer(KEY_ADMIN)
    for values in CR_VALUES[:3]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A)
    exported = rig.client.get("/admin/export", params={"tenant": "a"}, headers=admin).json()
    good = {**exported[0], "group_id": "other"}
    before = state_of(rig.store)
    if isinstance(bad, dict):
        r = rig.client.post(
            "/admin/import",
            params={"tenant": "b"},
            json=[good, {**exported[0], **bad}],
            headers=admin,
        )
        assert_error(r, 400, "invalid_entries")
    else:  # not JSON at all, though Python's json module would read it
        text = json.dumps([good, exported[0]]).replace('"hits": 0', f'"hits": {bad}', 1)
        r = rig.client.post(
            "/admin/import",
            params={"tenant": "b"},
            content=text,
            headers={**admin, "Content-Type": "application/json"},
        )
        assert_error(r, 400, "invalid_json")
    assert state_of(rig.store) == before


def test_nan_already_in_the_store_never_makes_admin_reads_500(make):
    rig = make(AUTH)
    admin = bearer(KEY_ADMIN)
    for values in CR_VALUES[:3]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A)
    entry = rig.store.list_entries("a")[0]
    with rig.store._tx() as c:  # what an earlier, unchecked import could have left behind
        c.execute(
            "UPDATE entries SET validation=?, rules=? WHERE id=?",
            ('{"passed": NaN, "of": Infinity}', "{}", entry.id),
        )
        c.execute("UPDATE examples SET answer='NaN' WHERE tenant='a'")
    for path in ("/admin/entries", f"/admin/entries/{entry.id}", "/admin/export", "/admin/stats"):
        r = rig.client.get(path, params={"tenant": "a"}, headers=admin)
        assert r.status_code == 200, (path, r.text)
        assert "NaN" not in r.text and "Infinity" not in r.text
    one = rig.client.get(f"/admin/entries/{entry.id}", params={"tenant": "a"}, headers=admin).json()
    assert one["validation"] == {"passed": None, "of": None}


def test_stalled_bodies_time_out_and_hold_only_their_own_tenants_slots(make):
    import socket
    import time

    config = ServerConfig(
        api_keys={KEY_A: "a", KEY_B: "b"},
        rate_per_s=0,
        max_inflight=3,
        max_inflight_per_caller=2,
        body_timeout_s=3.0,
        public_metrics=True,
    )
    rig = make(config)
    body = json.dumps(chat_body(CURRENT_RATIO, CR_VALUES[0])).encode()
    with (
        BackgroundServer(rig.app) as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http,
    ):
        stalled = []
        for _ in range(2):  # headers and the first bytes of a body that never finishes
            sock = socket.create_connection((server.host, server.port))
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
                + KEY_A.encode()
                + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                + body[:20]
            )
            stalled.append(sock)
        began = time.monotonic()
        while sample_value(http.get("/metrics").text, "minicache_inflight_requests") < 2:
            assert time.monotonic() - began < 3
            time.sleep(0.02)
        r = http.post(
            "/v1/chat/completions",
            json=chat_body(CURRENT_RATIO, CR_VALUES[1]),
            headers=bearer(KEY_A),
        )
        assert_error(r, 503, "overloaded")
        assert r.headers["retry-after"] == "1"
        # another tenant is still served
        r = http.post(
            "/v1/chat/completions",
            json=chat_body(CURRENT_RATIO, CR_VALUES[1]),
            headers=bearer(KEY_B),
        )
        assert r.status_code == 200, r.text
        for sock in stalled:  # each stalled request ends with 408 once its body is overdue
            sock.settimeout(10)
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
            sock.close()
            assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
            assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"
        assert time.monotonic() - began < 15
        r = http.post(
            "/v1/chat/completions",
            json=chat_body(CURRENT_RATIO, CR_VALUES[2]),
            headers=bearer(KEY_A),
        )
        assert r.status_code == 200, r.text
    assert rig.mc.stats("a")["requests"] == 1 and rig.mc.stats("b")["requests"] == 1


def test_sqlite_write_lock_held_elsewhere_is_a_bounded_503_with_retry_after(make, tmp_path):
    import subprocess
    import sys
    import time

    path = tmp_path / "locked.db"
    rig = make(AUTH, store=SQLiteStore(path, busy_timeout_s=0.5))
    assert (
        SQLiteStore(tmp_path / "default.db").busy_timeout_s <= 10
    )  # the default wait is bounded too
    chat(rig, CURRENT_RATIO, CR_VALUES[0], key=KEY_A)
    before = state_of(rig.store)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time\n"
                "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE')\n"
                "print('locked', flush=True)\n"
                "time.sleep(35)\n"
            ),
            str(path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        began = time.monotonic()
        r = rig.client.post(
            "/v1/chat/completions",
            json=chat_body(CURRENT_RATIO, CR_VALUES[1]),
            headers=bearer(KEY_A),
        )
        assert_error(r, 503, "store_busy")
        assert int(r.headers["retry-after"]) >= 1
        r = rig.client.post(
            "/admin/import", params={"tenant": "b"}, json=[], headers=bearer(KEY_ADMIN)
        )
        assert_error(r, 503, "store_busy")
        assert time.monotonic() - began < 10
        assert rig.client.get("/health").status_code == 200  # readers are not blocked (WAL)
    finally:
        holder.kill()
        holder.wait()
    assert state_of(rig.store) == before
    chat(rig, CURRENT_RATIO, CR_VALUES[1], key=KEY_A)


@pytest.mark.postgres
def test_on_postgresql_nul_bytes_and_surrogates_are_400_and_write_nothing(make, pg_dsn):
    from minicache.store import PostgresStore

    rig = make(AUTH, store=PostgresStore(pg_dsn))
    admin = bearer(KEY_ADMIN)
    for values in CR_VALUES[:3]:
        chat(rig, CURRENT_RATIO, values, key=KEY_A)
    exported = rig.client.get("/admin/export", params={"tenant": "a"}, headers=admin).json()
    before = state_of(rig.store, tenants=("default", "a", "b"))
    r = rig.client.post(
        "/v1/chat/completions",
        headers=bearer(KEY_A),
        json=chat_body(CURRENT_RATIO, CR_VALUES[3], minicache={"group": "g\x00"}),
    )
    assert_error(r, 400)
    assert_error(
        rig.client.post("/v1/solve", json={"question": "q\x00"}, headers=bearer(KEY_A)), 400
    )
    r = rig.client.post(
        "/v1/solve", content=b'{"question": "q", "group": "\\ud800"}', headers=bearer(KEY_A)
    )
    assert_error(r, 400, "invalid_json")
    for bad in ({"group_id": "g\x00"}, {"examples": [{"question": "q\x00", "answer": 1}]}):
        r = rig.client.post(
            "/admin/import", params={"tenant": "b"}, json=[{**exported[0], **bad}], headers=admin
        )
        assert_error(r, 400, "invalid_entries")
    assert_error(rig.client.get("/admin/entries", params={"tenant": "\x00"}, headers=admin), 400)
    assert_error(rig.client.get("/admin/entries/a%00b", params={"tenant": "a"}, headers=admin), 400)
    assert state_of(rig.store, tenants=("default", "a", "b")) == before
    assert chat(rig, CURRENT_RATIO, CR_VALUES[3], key=KEY_A)["minicache"]["route"] == "hit"


def test_repeated_bad_keys_are_throttled_per_client_address(make):
    rig = make(
        ServerConfig(
            api_keys={KEY_A: "a"},
            admin_keys={KEY_ADMIN},
            rate_per_s=0,
            auth_fail_per_s=0.01,
            auth_fail_burst=3,
        )
    )
    guesser = TestClient(rig.app, client=("10.0.0.9", 4000))
    other = TestClient(rig.app, client=("10.0.0.10", 4000))
    body = chat_body(CURRENT_RATIO, CR_VALUES[0])
    for _ in range(3):
        assert_error(
            guesser.post("/v1/chat/completions", json=body, headers=bearer("sk-guess-000000")), 401
        )
    r = guesser.post("/v1/chat/completions", json=body, headers=bearer("sk-guess-000001"))
    error = assert_error(r, 429, "too_many_auth_failures")
    assert error["type"] == "rate_limit_error" and int(r.headers["retry-after"]) >= 1
    # locked out: a right key from that address learns nothing either; admin guesses count the same
    assert_error(guesser.post("/v1/chat/completions", json=body, headers=bearer(KEY_A)), 429)
    assert_error(guesser.get("/admin/stats", headers=bearer(KEY_ADMIN)), 429)
    # other addresses are not affected, and a missing key is no guess
    assert other.post("/v1/chat/completions", json=body, headers=bearer(KEY_A)).status_code == 200
    for _ in range(5):
        assert_error(other.post("/v1/chat/completions", json=body), 401, "missing_api_key")
    assert other.get("/admin/stats", headers=bearer(KEY_ADMIN)).status_code == 200
    assert rig.mc.stats("a")["requests"] == 1


def test_serve_refuses_a_public_address_without_api_keys(make, monkeypatch):
    import uvicorn
    from click.testing import CliRunner

    from minicache.cli.main import main
    from minicache.server import serve

    rig = make()
    started: list[str] = []

    def fake_local(store, **kwargs):
        started.append("engine")
        return rig.mc

    monkeypatch.setattr(MiniCache, "local", fake_local)
    monkeypatch.setattr(
        uvicorn.Server, "run", lambda self, sockets=None: started.append(self.config.host)
    )
    monkeypatch.setattr(rig.mc, "close", lambda: None)
    for key in ("MINICACHE_SERVER_API_KEYS", "MINICACHE_SERVER_ADMIN_KEYS"):
        monkeypatch.delenv(key, raising=False)
    for host in ("0.0.0.0", "192.168.1.5", "::", "example.com"):
        with pytest.raises(ConfigError, match="--insecure-no-auth"):
            serve(host, 8123, "x.db", ServerConfig())
    assert started == []  # refused before any model was loaded
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1 and "--insecure-no-auth" in result.output and started == []
    for host in ("127.0.0.1", "localhost", "::1"):
        serve(host, 8123, "x.db", ServerConfig())
    serve("0.0.0.0", 8123, "x.db", ServerConfig(api_keys={KEY_A: "a"}))
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--insecure-no-auth"])
    assert result.exit_code == 0, result.output
    assert started == [
        "engine",
        "127.0.0.1",
        "engine",
        "localhost",
        "engine",
        "::1",
        "engine",
        "0.0.0.0",
        "engine",
        "0.0.0.0",
    ]


def test_openapi_schema_is_served_and_describes_every_endpoint(rig):
    schema = rig.client.get("/openapi.json").json()
    operations = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    assert {
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/solve"),
        ("GET", "/v1/models"),
        ("GET", "/health"),
        ("GET", "/metrics"),
        ("GET", "/admin/entries"),
        ("GET", "/admin/entries/{entry_id}"),
        ("DELETE", "/admin/entries/{entry_id}"),
        ("POST", "/admin/invalidate"),
        ("GET", "/admin/groups"),
        ("GET", "/admin/export"),
        ("POST", "/admin/import"),
        ("POST", "/admin/freeze"),
        ("GET", "/admin/stats"),
    } <= operations
    schemas = schema["components"]["schemas"]
    chat_schema = schemas["ChatCompletionRequest"]
    assert chat_schema["required"] == ["messages"] and "minicache" in chat_schema["properties"]
    assert schema["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"] == {"$ref": "#/components/schemas/ChatCompletionRequest"}
    assert "EntryExport" in schemas and "ExportedEntry" in schemas
    assert all(
        "422" not in op["responses"] for ops in schema["paths"].values() for op in ops.values()
    )
    assert "400" in schema["paths"]["/v1/solve"]["post"]["responses"]
