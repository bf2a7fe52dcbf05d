"""A bounded, schema-driven fuzz test of the HTTP API (hypothesis, fake models).

The operations come from the served ``/openapi.json``: every path and method in it is exercised,
its query and path parameters are filled in, and its JSON body is built from the schema's property
names with arbitrary JSON values (or replaced by hostile raw bytes: NaN, deep nesting, lone
surrogates, invalid UTF-8). Keys and ``X-MiniCache-*`` headers vary too. Whatever comes back:

- never a 500 (nor any 5xx but 502, "no answer", and 503, "overloaded"), and always a JSON body for errors;
- a rejected request (4xx) leaves the store exactly as it was: counters, entries, groups.

The dashboard's pages are fuzzed the same way, on both stores, in test_dashboard_fuzz.py.
"""

from __future__ import annotations

import json
import string
from collections import Counter

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.store import SQLiteStore, Store

KEY_A, KEY_ADMIN = "sk-fuzz-tenant-a1", "sk-fuzz-admin-000"
TENANTS = ("a", "default", "b")
EXAMPLES_WITH_BODY, EXAMPLES_WITHOUT = (
    20,
    8,
)  # per operation: 184 requests, about half a minute on 2 busy cores


@pytest.fixture(scope="module")
def api(tmp_path_factory, sandbox):
    """An app with one built entry for tenant a, and its OpenAPI schema."""
    store = SQLiteStore(tmp_path_factory.mktemp("fuzz") / "fuzz.db")
    engine = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=store,
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False, audit_rate=0.0),
    )  # no background writes
    # no rate limits: the fuzzer sends many requests, including wrong keys, from one address
    config = ServerConfig(
        api_keys={KEY_A: "a"}, admin_keys={KEY_ADMIN}, rate_per_s=0, auth_fail_per_s=0
    )
    client = TestClient(create_app(engine, config))
    for values in CR_VALUES[:3]:
        r = client.post(
            "/v1/chat/completions",
            headers={"Authorization": f"Bearer {KEY_A}"},
            json={
                "messages": [{"role": "user", "content": CURRENT_RATIO.ask(*values)}],
                "minicache": {"group": "cr"},
            },
        )
        assert r.status_code == 200, r.text
    schema = client.get("/openapi.json").json()
    yield client, store, schema
    client.close()
    engine.close()


def operations(schema: dict) -> list[tuple[str, str, dict]]:
    return sorted(
        (method.upper(), path, op)
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if not path.startswith("/dashboard")
    )


def body_properties(schema: dict, op: dict) -> list[str]:
    ref = (
        op.get("requestBody", {})
        .get("content", {})
        .get("application/json", {})
        .get("schema", {})
        .get("$ref")
    )
    if not ref:
        return []
    return sorted(schema["components"]["schemas"][ref.rsplit("/", 1)[1]].get("properties", {}))


def snapshot(store: Store, extra: tuple[str, ...] = ()) -> dict:
    return {
        t: (
            store.counters(t),
            sorted((e.id, e.status, e.hits, e.failures, e.version) for e in store.list_entries(t)),
            sorted((g.id, g.status, g.n_examples, g.build_failures) for g in store.list_groups(t)),
        )
        for t in (*TENANTS, *extra)
    }


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", " ", "\x00", "auto", "step", "true", "1", "cr", "user", "text", "²"])
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
hostile_raw = st.sampled_from(
    [
        b"",
        b"{",
        b"null",
        b"[]",
        b'"text"',
        b"\xff\xfe{}",
        b'{"messages": NaN}',
        b'{"question": Infinity}',
        b'{"question": "\\ud800"}',
        b'{"messages": [{"role": "user", "content": "\\udfff q"}]}',
        b'{"question": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b"[" * 70 + b"]" * 70,
        b'{"question": 1' + b"0" * 5000 + b"}",
        b'[{"group_id": "g", "hits": 1' + b"0" * 30 + b"}]",
    ]
)
question = st.text(max_size=30) | st.sampled_from(
    [
        "",
        " ",
        "a\x00b",
        "x" * 40_000,
        CURRENT_RATIO.ask(*CR_VALUES[3]),
        CURRENT_RATIO.ask(*CR_VALUES[4]) + " Use 99999999999 decimal places.",
        CURRENT_RATIO.ask(*CR_VALUES[5]) + " Round to 2 decimal places.",
    ]
)
header_text = st.text(alphabet=string.ascii_letters + string.digits + " -_./", max_size=12)


@st.composite
def requests(draw, schema: dict, operation: tuple[str, str, dict]) -> dict:
    method, path, op = operation
    params = {}
    for p in op.get("parameters", []):
        if p["in"] == "path":
            path = path.replace(
                "{" + p["name"] + "}", draw(st.sampled_from(["ent_missing", "x", "%00", "a b"]))
            )
        elif p["in"] == "query" and draw(st.booleans()):
            params[p["name"]] = draw(
                st.sampled_from(
                    ["a", "default", "b", "", " ", "\x00", "²", "-1", "3", "101", "active", "weird"]
                )
                | header_text
            )
    headers = {}
    right = (
        KEY_A if path.startswith("/v1") else KEY_ADMIN
    )  # mostly the right key, so requests get past auth
    key = draw(
        st.sampled_from([right] * 6 + [KEY_A, KEY_ADMIN, "sk-wrong-key-0000", None, "malformed"])
    )
    if key == "malformed":
        headers["Authorization"] = "Basic abc"
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    for name in draw(
        st.lists(
            st.sampled_from(["Group", "Mode", "No-Cache", "No-Store", "Force-Refresh"]),
            max_size=2,
            unique=True,
        )
    ):
        headers[f"X-MiniCache-{name}"] = draw(header_text)
    content = None
    properties = body_properties(schema, op)
    if method in ("POST", "PUT", "PATCH"):
        if draw(st.integers(0, 3)) == 0:
            content = draw(hostile_raw)
        else:
            if path == "/admin/import":
                body = draw(
                    st.lists(
                        st.dictionaries(
                            st.sampled_from(
                                [
                                    "group_id",
                                    "program",
                                    "template",
                                    "hits",
                                    "examples",
                                    "rules",
                                    "validation",
                                ]
                            ),
                            json_value,
                            max_size=4,
                        ),
                        max_size=2,
                    )
                )
            else:
                body = {
                    name: draw(json_value)
                    for name in draw(
                        st.lists(st.sampled_from(properties or ["x"]), max_size=4, unique=True)
                    )
                }
                # often well-formed, so that the engine's own checks run too
                if "messages" in properties and draw(st.booleans()):
                    body["messages"] = [{"role": "user", "content": draw(question)}]
                if "question" in properties and draw(st.booleans()):
                    body["question"] = draw(question)
            content = json.dumps(body).encode()
        headers["Content-Type"] = draw(
            st.sampled_from(["application/json", "application/json", "text/plain"])
        )
    return {"method": method, "url": path, "params": params, "headers": headers, "content": content}


def test_fuzzed_requests_never_get_500_and_rejected_ones_change_nothing(api):
    client, store, schema = api

    statuses: Counter[int] = Counter()

    def check(request: dict) -> None:
        tenant = request["params"].get("tenant")
        before = snapshot(store, (tenant,) if isinstance(tenant, str) else ())
        r = client.request(**request)
        statuses[r.status_code] += 1
        assert r.status_code < 500 or r.status_code in (502, 503), (
            request,
            r.status_code,
            r.text[:300],
        )
        if r.status_code >= 400:
            error = r.json()["error"]
            assert error["message"] and error["type"], r.text
            if r.status_code < 500:
                assert snapshot(store, (tenant,) if isinstance(tenant, str) else ()) == before, (
                    request,
                    r.text,
                )

    tried = []
    for operation in operations(
        schema
    ):  # every operation the schema lists, each with its own budget
        budget = EXAMPLES_WITH_BODY if operation[0] == "POST" else EXAMPLES_WITHOUT
        settings(
            max_examples=budget,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(given(request=requests(schema, operation))(check))()
        tried.append(operation[:2])
    assert len(tried) >= 14 and ("POST", "/admin/import") in tried
    print(f"\nfuzz: {sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}")
    assert {200, 400, 401, 403, 404} <= set(
        statuses
    )  # it reached the endpoints, not only the parsers
