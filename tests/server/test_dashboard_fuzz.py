"""The fuzz test of test_server_fuzz.py, extended to the dashboard's query parameters and paths, on
both stores (SQLite, and the real PostgreSQL server of tests/pg.py).

Arbitrary text (NUL and other control characters, digits that are not ASCII such as "²", repeated
parameters, dot segments, %-encodings) in ``?page=``, ``?after=``, ``?tenant=``, ``?status=``,
``?unit=``, ``next=`` and the ids in ``/dashboard/entries/<id>`` and ``/dashboard/groups/<id>``, with
an admin's, a tenant's, a wrong or no key; actions posted with arbitrary forms. Whatever comes back:

- never a 500 (a 503 only for a busy store);
- a rejected request (4xx) changes nothing: the store's counters, entries and groups, the frozen flag;
- no redirect leaves the server, and a login's leaves nothing but the dashboard.

Requests that once answered 500 are always sent, then a grid of every hostile value in each
parameter and id one at a time (random draws would reach those only by luck), then the fuzz.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterator
from urllib.parse import quote, unquote, urlencode, urlsplit

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_server_fuzz import KEY_A, KEY_ADMIN, snapshot

from fakes import CR_VALUES, CURRENT_RATIO, FakeSmall, FakeTarget, HashEmbedder
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.dashboard.routes import COOKIE
from minicache.store import SQLiteStore, Store

DASHBOARD_EXAMPLES = 300  # per store, after the grid: about 10 s a store on this machine

# (method, path, the query parameters it reads): a request mostly sends its page's own parameters
DASHBOARD_PAGES = (
    ("GET", "", ("tenant", "unit")),
    ("GET", "/groups", ("tenant", "page", "status")),
    ("GET", "/groups/{id}", ("tenant",)),
    ("GET", "/entries/{id}", ("tenant",)),
    ("GET", "/entries/{id}/{action}", ("tenant",)),
    ("GET", "/events", ("tenant",)),
    ("GET", "/events/feed", ("tenant", "after")),
    ("GET", "/freeze", ("tenant",)),
    ("GET", "/login", ("next", "message")),
    ("GET", "/static/{id}", ()),
    ("POST", "/entries/{id}/{action}", ("tenant",)),
    ("POST", "/freeze", ("tenant",)),
    ("POST", "/login", ("next",)),
    ("POST", "/logout", ()),
)
QUERY_NAMES = ("page", "after", "tenant", "status", "unit", "next", "message")
# What a page may misread: NUL and control characters (PostgreSQL refuses NUL in text), digits that
# are not ASCII ("²".isdigit() is true, int("²") raises), dot segments and %-encodings.
HOSTILE = ["", " ", "\x00", "a\x00b", "ent\x00x", "\n", "\x7f", "²", "١٢", "-1", "0", "1", "2" * 13]
HOSTILE += ["..", "../..", "%00", "%2e%2e", "%zz", "/dashboard/../../evil", "//evil.example"]
HOSTILE += ["a", "b", "default", "active", "minute", "invalidate", "delete", "ent_x", "grp_x"]
hostile_text = st.integers(0, 2).flatmap(
    lambda i: st.text(max_size=12) if i == 0 else st.sampled_from(HOSTILE)
)


def encoded(text: str, raw: bool) -> str:
    """``text`` for a URL: %-encoded whole, or as typed (dots, slashes and % stay)."""
    return quote(text, safe="/%.&=" if raw else "")


@st.composite
def dashboard_requests(draw, entry_id: str) -> dict:
    method, template, reads = draw(st.sampled_from(DASHBOARD_PAGES))
    ids = st.sampled_from([entry_id, entry_id + "x"]) | hostile_text
    path = template.replace("{id}", encoded(draw(ids), draw(st.booleans())))
    path = path.replace("{action}", encoded(draw(hostile_text), draw(st.booleans())))
    names = st.sampled_from(reads) | st.sampled_from(QUERY_NAMES) if reads else st.just("page")
    pairs = draw(st.lists(st.tuples(names, hostile_text), max_size=3))  # a name may repeat
    query = "&".join(f"{n}={encoded(v, draw(st.booleans()))}" for n, v in pairs)
    headers = {}
    key = draw(st.sampled_from([KEY_ADMIN, KEY_ADMIN, KEY_ADMIN, KEY_A, "sk-wrong-key-0", None]))
    if key:
        headers["Cookie"] = f"{COOKIE}={key}"
    content = None
    if method == "POST":
        form = {
            name: draw(st.sampled_from(["yes", "0", "1"]) | hostile_text)
            for name in draw(
                st.lists(st.sampled_from(["confirm", "frozen", "key", "next"]), unique=True)
            )
        }
        content = urlencode(form).encode() if draw(st.integers(0, 4)) else b"\xff\xfe=\x00%zz&&="
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    url = "/dashboard" + path + ("?" + query if query else "")
    return {"method": method, "url": url, "headers": headers, "content": content}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def dashboard(request, tmp_path, sandbox):
    """An app over either store, with one built entry for tenant a; its client shows redirects."""
    if request.param == "sqlite":
        store: Store = SQLiteStore(tmp_path / "fuzz.db")
    else:
        pytest.importorskip("psycopg")
        from minicache.store import PostgresStore

        store = PostgresStore(request.getfixturevalue("pg_dsn"))
    engine = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=store,
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(background_builds=False, audit_rate=0.0),
    )
    config = ServerConfig(
        api_keys={KEY_A: "a"}, admin_keys={KEY_ADMIN}, rate_per_s=0, auth_fail_per_s=0
    )
    with TestClient(create_app(engine, config), follow_redirects=False) as client:
        for values in CR_VALUES[:4]:
            body = {"question": CURRENT_RATIO.ask(*values), "group": "cr"}
            r = client.post("/v1/solve", json=body, headers={"Authorization": f"Bearer {KEY_A}"})
            assert r.status_code == 200, r.text
        [entry] = store.list_entries("a")
        yield client, engine, entry.id
    engine.close()


# Requests that once answered 500 (or left the dashboard): always sent, besides the grid and fuzz.
DASHBOARD_REGRESSIONS = (
    "/dashboard/groups?page=%C2%B2",
    "/dashboard/events/feed?after=%C2%B2",
    "/dashboard?tenant=a%00",
    "/dashboard/entries/ent%00x",
    "/dashboard/entries/x%00%0aERROR:minicache.server:FORGED",
    "/dashboard/groups?tenant=a&tenant=b",
    "/dashboard/login?next=/dashboard/../../evil",
)


def dashboard_grid(entry_id: str) -> Iterator[dict]:
    """Each hostile value in every parameter a page reads and in every id of its path, one at a time,
    with an admin key (which gets furthest): what random draws would reach only by luck."""
    admin = {"Cookie": f"{COOKIE}={KEY_ADMIN}"}
    for url in DASHBOARD_REGRESSIONS:
        yield {"method": "GET", "url": url, "headers": admin}
    for method, template, reads in DASHBOARD_PAGES:
        for value in HOSTILE:
            urls = [template.replace("{id}", quote(value, safe=""))] if "{id}" in template else []
            if method == "GET":
                own = template.replace("{id}", entry_id)
                urls += [f"{own}?{name}={quote(value, safe='')}" for name in reads]
            for url in urls:
                url = url.replace("{action}", "invalidate")
                content = b"confirm=yes" if method == "POST" else None
                yield {
                    "method": method,
                    "url": "/dashboard" + url,
                    "headers": admin,
                    "content": content,
                }


def test_fuzzed_dashboard_requests_never_get_500_and_rejected_ones_change_nothing(dashboard):
    client, engine, entry_id = dashboard
    statuses: Counter[int] = Counter()

    def state() -> tuple:
        return snapshot(engine.store), engine.config.frozen

    def send(request: dict) -> None:
        before = state()
        r = client.request(**request)
        statuses[r.status_code] += 1
        assert r.status_code < 500 or r.status_code == 503, (request, r.status_code, r.text[-300:])
        if 300 <= r.status_code < 400:  # no redirect leaves the server, nor a login the dashboard
            location = urlsplit(r.headers["location"])
            assert location.netloc in ("", "testserver"), (request, r.headers)
            if request["url"].startswith("/dashboard/login"):
                landing = posixpath.normpath(unquote(location.path))
                assert landing.startswith("/dashboard"), (request, r.headers)
        if 400 <= r.status_code < 500:
            assert state() == before, (request, r.status_code)

    for request in dashboard_grid(entry_id):
        send(request)
    settings(
        max_examples=DASHBOARD_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )(given(request=dashboard_requests(entry_id))(send))()
    print(f"\ndashboard fuzz: {sum(statuses.values())} requests, statuses {dict(statuses)}")
    assert {200, 303, 400, 404} <= set(statuses)  # it reached the pages, not only the login
    assert engine.store.list_entries("a")  # the grid's actions named no real entry
