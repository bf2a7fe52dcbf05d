"""The dashboard at /dashboard: login, tenant scoping and actions over HTTP (TestClient), the sampler
behind its charts and live feed, and walks through the pages in one real headless Chromium
(Debian's ``chromium`` + ``chromium-driver`` with selenium, on uvicorn servers on loopback): the
actions and tenant isolation, and the overview's history after a restart on the same store."""

from __future__ import annotations

import os
import re
import shutil

import httpx
import pytest
import test_server

from fakes import (
    CR_VALUES,
    CURRENT_RATIO,
    SI_VALUES,
    SIMPLE_INTEREST,
    FakeSmall,
    FakeTarget,
    HashEmbedder,
)
from minicache.config.engine import VerifyConfig
from minicache.engine import EngineConfig, MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.dashboard.routes import COOKIE
from minicache.server.dashboard.tracker import StoredTenants, Tracker
from minicache.server.testing import BackgroundServer
from minicache.store import SQLiteStore

KEY_A, KEY_B, KEY_ADMIN = "sk-tenant-a-0001", "sk-tenant-b-0002", "sk-admin-only-03"
AUTH = ServerConfig(api_keys={KEY_A: "a", KEY_B: "b"}, admin_keys={KEY_ADMIN}, rate_per_s=0)
make = test_server.make  # test_server's app fixture, registered here too: ``dash`` wraps it


@pytest.fixture
def dash(
    make,
):  # test_server's app over fakes, with a client that shows redirects instead of following them
    def factory(config: ServerConfig = AUTH):
        rig = make(config)
        rig.client.follow_redirects = False
        return rig

    return factory


def ask(client, key: str, domain, values) -> dict:
    r = client.post(
        "/v1/solve",
        json={"question": domain.ask(*values)},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert r.status_code == 200, r.text
    return r.json()


def login(client, key: str) -> httpx.Response:
    return client.post("/dashboard/login", data={"key": key, "next": "/dashboard/groups"})


def cached_entry(rig, tenant: str = "a") -> str:
    for values in CR_VALUES[:4]:
        ask(rig.client, KEY_A if tenant == "a" else KEY_B, CURRENT_RATIO, values)
    [entry] = rig.mc.store.list_entries(tenant, "active")
    return entry.id


# -- login and tenants ------------------------------------------------------------------------


def test_pages_need_a_login_and_the_key_lives_only_in_an_httponly_cookie(dash):
    rig = dash()
    c = rig.client
    r = c.get("/dashboard/groups")
    assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/login")
    bad = login(c, "sk-not-a-key-at-all")
    assert bad.status_code == 401 and "Unknown key" in bad.text
    r = login(c, KEY_ADMIN)
    assert r.status_code == 303 and r.headers["location"] == "/dashboard/groups"
    assert KEY_ADMIN not in r.headers["location"]
    cookie = r.headers["set-cookie"]
    for attribute in (f"{COOKIE}=", "HttpOnly", "SameSite=strict", "Path=/dashboard"):
        assert attribute in cookie
    assert c.get("/dashboard/groups").status_code == 200
    c.post("/dashboard/logout")
    assert c.get("/dashboard/groups").status_code == 303


def test_login_redirects_only_inside_the_dashboard(dash):
    c = dash().client
    r = c.post("/dashboard/login", data={"key": KEY_ADMIN, "next": "https://evil.example/"})
    assert r.headers["location"] == "/dashboard"
    for outside in (
        "/dashboard/../../evil",
        "/dashboard/../evil",
        "/dashboard/%2e%2e/evil",
        "/dashboardx",
        "//evil.example/dashboard",
        "/dashboard/\\evil",
    ):
        r = c.post("/dashboard/login", data={"key": KEY_ADMIN, "next": outside})
        assert r.headers["location"] == "/dashboard", outside
    r = c.post("/dashboard/login", data={"key": KEY_ADMIN, "next": "/dashboard/groups?tenant=a"})
    assert r.headers["location"] == "/dashboard/groups?tenant=a"


def test_a_tenant_key_sees_its_own_tenant_and_is_refused_another(dash):
    rig = dash()
    entry_a = cached_entry(rig, "a")
    c = rig.client
    login(c, KEY_B)
    assert c.get("/dashboard/groups").status_code == 200
    for url in (
        "/dashboard?tenant=a",
        "/dashboard/groups?tenant=a",
        f"/dashboard/entries/{entry_a}?tenant=a",
        "/dashboard/events?tenant=a",
    ):
        r = c.get(url)
        assert r.status_code == 403 and "cannot open the pages of tenant" in r.text, url
        assert "''s" not in r.text and "&#39;&#39;s" not in r.text
    own = c.get("/dashboard").text
    assert (
        "tenant b" in own and 'id="latency"' not in own and 'id="tenants"' not in own
    )  # admins only
    r = c.get(f"/dashboard/entries/{entry_a}")  # under its own tenant: no such entry
    assert r.status_code == 404 and entry_a in r.text
    assert "current_assets" not in r.text
    # read-only: no actions, even on its own pages
    assert c.get(f"/dashboard/entries/{entry_a}/invalidate").status_code == 403
    assert (
        c.post(f"/dashboard/entries/{entry_a}/invalidate", data={"confirm": "yes"}).status_code
        == 403
    )
    assert rig.mc.store.get_entry("a", entry_a).status == "active"
    login(c, KEY_A)
    page = c.get(f"/dashboard/entries/{entry_a}")
    assert (
        page.status_code == 200
        and "current_assets" in page.text
        and 'id="invalidate"' not in page.text
    )


def test_with_auth_off_only_an_admin_key_logs_in_like_the_admin_endpoints(dash):
    closed = dash(ServerConfig(rate_per_s=0)).client
    r = login(closed, "sk-anything-at-all")
    assert r.status_code == 401 and "No admin key is configured" in r.text
    rig = dash(ServerConfig(admin_keys={KEY_ADMIN}, rate_per_s=0))
    assert login(rig.client, "sk-anything-at-all").status_code == 401
    assert login(rig.client, KEY_ADMIN).status_code == 303
    r = rig.client.get("/dashboard")
    assert r.status_code == 200 and "Overview" in r.text


def test_wrong_keys_count_against_the_failed_authentication_throttle(dash):
    rig = dash(
        ServerConfig(
            api_keys={KEY_A: "a"},
            admin_keys={KEY_ADMIN},
            rate_per_s=0,
            auth_fail_per_s=0.01,
            auth_fail_burst=2,
        )
    )
    statuses = [login(rig.client, f"sk-wrong-guess-{i:04d}").status_code for i in range(3)]
    assert statuses == [401, 401, 429]
    assert (
        login(rig.client, KEY_ADMIN).status_code == 429
    )  # the address is throttled, right keys included


# -- pages and actions ------------------------------------------------------------------------


def test_groups_and_entry_pages_show_status_program_template_and_requests(dash):
    rig = dash()
    entry_id = cached_entry(rig)
    for values in SI_VALUES[:2]:
        ask(rig.client, KEY_A, SIMPLE_INTEREST, values)
    c = rig.client
    login(c, KEY_ADMIN)
    groups = " ".join(c.get("/dashboard/groups?tenant=a").text.split())
    assert "2 groups: 1 cached, 0 building, 0 uncacheable, 1 gathering examples" in groups
    assert f"/dashboard/entries/{entry_id}?tenant=a" in groups
    overview = c.get("/dashboard?tenant=a").text
    latency = overview[
        overview.index('id="latency"') : overview.index("</table>", overview.index('id="latency"'))
    ]
    assert "b-hit" in latency and "b-miss" in latency and " ms" in latency
    page = c.get(f"/dashboard/entries/{entry_id}?tenant=a").text
    assert 'class="code"' in page  # highlighted by Pygments
    for name in ("current_assets", "current_liabilities"):
        assert name in page
    assert "45,000" in page and "30,000" in page  # a request the miss path recorded
    assert re.search(r"reproduced <b>\d</b> of <b>3</b>", page)


def test_groups_are_named_by_a_request_with_numbers_masked(dash):
    rig = dash()
    entry_id = cached_entry(rig)
    c = rig.client
    login(c, KEY_ADMIN)
    name = "What is the current ratio if current assets are $# and current liabilities are $#?"
    groups = c.get("/dashboard/groups?tenant=a").text
    assert name in groups and "45,000" not in groups
    assert name in c.get(f"/dashboard/entries/{entry_id}?tenant=a").text


def test_an_admin_lands_on_the_busiest_tenant_and_each_card_says_its_window(dash):
    rig = dash()
    cached_entry(rig, "b")  # only b has requests; "default" and a have none
    c = rig.client
    login(c, KEY_ADMIN)
    overview = c.get("/dashboard").text
    assert "tenant b</small>" in " ".join(overview.split()) or "tenant b ·" in overview
    cards = overview[overview.index('id="cards"') : overview.index("</div>\n<p")]
    assert cards.count('class="card"') == cards.count("<i>")  # every card names its window
    assert "since this server started" in cards and "all time" in cards
    assert 'data-refresh="5000"' in overview  # the overview refreshes itself
    login(c, KEY_A)
    assert "tenant a" in c.get("/dashboard").text  # a tenant's key still opens its own


def test_an_error_answer_shows_its_message_in_the_events_feed(dash, monkeypatch):
    from minicache.errors import BackendUnavailable

    rig = dash()
    c = rig.client

    def down(*args, **kwargs):
        raise BackendUnavailable("cannot reach the target: connection refused")

    monkeypatch.setattr(rig.mc, "solve", down)
    r = c.post(
        "/v1/solve",
        json={"question": CURRENT_RATIO.ask(*CR_VALUES[0])},
        headers={"Authorization": f"Bearer {KEY_A}", "X-Request-Id": "req-feed-1"},
    )
    assert r.status_code >= 500
    login(c, KEY_A)
    feed = c.get("/dashboard/events/feed?after=0").json()["html"]
    assert "connection refused" in feed and "req-feed-1" in feed
    login(c, KEY_B)
    assert "connection refused" not in c.get("/dashboard/events/feed?after=0").json()["html"]


def test_invalidate_and_delete_need_confirmation_then_act(dash):
    rig = dash()
    entry_id = cached_entry(rig)
    c = rig.client
    login(c, KEY_ADMIN)
    confirm = c.get(f"/dashboard/entries/{entry_id}/invalidate?tenant=a")
    assert confirm.status_code == 200 and 'name="confirm" value="yes"' in confirm.text
    assert c.post(f"/dashboard/entries/{entry_id}/invalidate?tenant=a", data={}).status_code == 400
    assert rig.mc.store.get_entry("a", entry_id).status == "active"
    r = c.post(f"/dashboard/entries/{entry_id}/invalidate?tenant=a", data={"confirm": "yes"})
    assert r.status_code == 303 and rig.mc.store.get_entry("a", entry_id).status == "evicted"
    assert (
        c.post(
            f"/dashboard/entries/{entry_id}/invalidate?tenant=a", data={"confirm": "yes"}
        ).status_code
        == 404
    )
    r = c.post(f"/dashboard/entries/{entry_id}/delete?tenant=a", data={"confirm": "yes"})
    assert r.status_code == 303 and rig.mc.store.get_entry("a", entry_id) is None
    assert c.get(f"/dashboard/entries/{entry_id}?tenant=a").status_code == 404
    assert c.get("/dashboard/entries/x/explode?tenant=a").status_code == 404


def test_freeze_from_the_dashboard_stops_builds(dash):
    rig = dash()
    c = rig.client
    login(c, KEY_ADMIN)
    assert c.post("/dashboard/freeze", data={"confirm": "yes", "frozen": "1"}).status_code == 303
    assert rig.mc.config.frozen is True
    assert (
        c.post("/dashboard/freeze", data={"frozen": "0"}).status_code == 400
        and rig.mc.config.frozen is True
    )


def test_bad_query_values_get_a_400_page(dash):
    c = dash().client
    login(c, KEY_ADMIN)
    assert c.get("/dashboard?unit=week").status_code == 400
    assert c.get("/dashboard/groups?page=-1").status_code == 400
    assert c.get("/dashboard/events/feed?after=x").status_code == 400
    # Unicode digits pass str.isdigit() but not int(): a 400, never a 500.
    assert c.get("/dashboard/groups?page=%C2%B2").status_code == 400
    assert c.get("/dashboard/events/feed?after=%C2%B2").status_code == 400
    # A NUL in a tenant or an id never reaches the store (PostgreSQL would raise on it).
    assert c.get("/dashboard/groups?tenant=a%00b").status_code == 400
    assert c.get("/dashboard/entries/ent%00x").status_code == 400
    assert c.get("/dashboard/entries/ent%00x/invalidate").status_code == 400
    # A parameter given twice is refused rather than guessed.
    r = c.get("/dashboard/groups?tenant=a&tenant=b")
    assert r.status_code == 400 and "more than once" in r.text


def test_groups_are_paginated(dash):
    rig = dash()
    for i in range(120):
        rig.mc.store.ensure_group("a", f"g{i:03d}")
    c = rig.client
    login(c, KEY_ADMIN)
    first = c.get("/dashboard/groups?tenant=a").text
    assert first.count("<tr data-group=") == 50 and "page 1 of 3" in first
    last = c.get("/dashboard/groups?tenant=a&page=3").text
    assert last.count("<tr data-group=") == 20


def test_static_files_ship_in_the_package(dash):
    c = dash().client
    assert "Pygments" in c.get("/dashboard/static/dashboard.css").text
    assert "fetch(" in c.get("/dashboard/static/dashboard.js").text
    assert c.get("/dashboard/static/../routes.py").status_code == 404


# -- the sampler behind the chart and the live feed -------------------------------------------


class _Engine:
    """What the sampler reads of an engine: a store (a real one) and the engine's event list."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.events: list[dict] = []


def _count(store: SQLiteStore, tenant: str, **levels: int) -> None:
    """Bump ``tenant``'s counters up to ``levels``."""
    have = store.counters(tenant)
    for name, value in levels.items():
        if value > have.get(name, 0):
            store.bump(tenant, name, value - have.get(name, 0))


T0 = 60 * 16_667 + 20.0  # 20 s into a minute


def test_tracker_adds_counter_increments_to_their_minute_and_tags_events_with_their_tenant():
    engine = _Engine(SQLiteStore(":memory:"))
    engine.store.ensure_group("b", "g1")
    tracker = Tracker(engine, lambda: ["a", "b"], lambda tenant: 0.0)
    tracker.sample(T0)  # baseline
    _count(engine.store, "a", requests=5, hits=3, misses=2)
    _count(engine.store, "b", requests=2, fallbacks=1, errors=1)
    engine.events.append({"event": "build", "group": "g1", "ok": False, "attempts": 2})
    tracker.sample(T0 + 30)
    _count(engine.store, "a", requests=6, hits=4, misses=2)
    tracker.sample(T0 + 50)  # the next minute
    series = tracker.series(["a"], "minute", 3, now=T0 + 50)
    assert [v["requests"] for _, v in series] == [0, 5, 1]
    assert [v["hits"] for _, v in series] == [0, 3, 1]
    both = tracker.series(["a", "b"], "hour", 1, now=T0 + 50)
    assert both[0][1]["requests"] == 8 and both[0][1]["errors"] == 1
    kinds_b = [(e.kind, e.tenant) for e in tracker.feed({"b"})]
    assert sorted(kinds_b) == [("build-failed", "b"), ("error", "b"), ("fallback", "b")]
    assert tracker.feed({"a"}) == []
    newest = tracker.feed(None)[0].seq
    assert tracker.feed(None, after=newest) == []


def test_an_event_that_names_its_tenant_is_shown_to_that_tenant():
    """A merge deletes the merged group, so the store cannot say whose it was: the event says."""
    engine = _Engine(SQLiteStore(":memory:"))
    tracker = Tracker(engine, lambda: ["a", "b"], lambda tenant: 0.0)
    tracker.sample(T0)
    merge = {"event": "merge", "tenant": "b", "group": "g1", "merged": "g2", "examples": 3}
    engine.events.append(merge)
    tracker.sample(T0 + 5)
    [event] = tracker.feed({"b"})
    assert (event.kind, event.group, event.detail) == (
        "merge",
        "g1",
        "merged group g2 (3 examples)",
    )
    assert tracker.feed({"a"}) == []


def test_a_new_tracker_on_the_same_store_shows_the_history_of_the_one_before(tmp_path):
    path = tmp_path / "store.db"
    saved = {"a": 0.0}
    first = Tracker(_Engine(SQLiteStore(path)), lambda: ["a"], lambda tenant: saved["a"])
    first.sample(T0)
    _count(first.engine.store, "a", requests=4, hits=1)
    saved["a"] = 120.0
    first.sample(T0 + 10)
    _count(first.engine.store, "a", requests=6, hits=3)
    first.sample(T0 + 20)  # the last one, as Tracker.stop takes it at shutdown
    first.engine.store.close()

    saved["a"] = 0.0  # the estimate starts again with the process
    again = Tracker(_Engine(SQLiteStore(path)), lambda: ["a"], lambda tenant: saved["a"])
    again.sample(T0 + 3600)  # an hour later
    _count(again.engine.store, "a", requests=7)
    again.sample(T0 + 3610)
    hours = again.series(["a"], "hour", 2, now=T0 + 3610)
    assert [v["requests"] for _, v in hours] == [6, 1]
    assert [v["hits"] for _, v in hours] == [3, 0]
    assert [v["tokens_saved"] for _, v in hours] == [120.0, 0.0]
    assert again.series(["a"], "minute", 61, now=T0 + 3610)[0][1]["requests"] == 6


def test_the_tracker_keeps_the_minutes_it_shows_and_the_one_their_oldest_follows(tmp_path):
    store = SQLiteStore(tmp_path / "store.db")
    tracker = Tracker(_Engine(store), lambda: ["a"], lambda tenant: 0.0, minutes=3, hours=2)
    for i in range(6):
        _count(store, "a", requests=i)
        tracker.sample(T0 + 60 * i)
    assert len(store.history("a", "minute", 0)) == 4
    # one request a minute: the oldest minute shown counts its own, not none
    assert [v["requests"] for _, v in tracker.series(["a"], "minute", 3, now=T0 + 300)] == [
        1,
        1,
        1,
    ]


def test_the_store_tenants_are_read_at_most_once_a_minute():
    store = SQLiteStore(":memory:")
    store.ensure_group("a", "g1")
    reads: list[list[str]] = []

    def read() -> list[str]:
        reads.append(store.tenants())
        return reads[-1]

    clock = [100.0]
    stored = StoredTenants(read, max_age_s=60.0, clock=lambda: clock[0])
    tracker = Tracker(_Engine(store), stored, lambda tenant: 0.0)
    tracker.sample(T0)
    store.ensure_group("b", "g2")
    clock[0] += 55
    tracker.sample(T0 + 5)
    assert len(reads) == 1 and tracker.sampled_tenants == ["a"]
    clock[0] += 5  # a minute since the read: the new tenant is listed
    tracker.sample(T0 + 10)
    assert len(reads) == 2 and tracker.sampled_tenants == ["a", "b"]


def test_the_overview_shows_the_requests_of_the_server_that_ran_before_on_the_store(make, tmp_path):
    path = tmp_path / "shared.db"
    first = make(AUTH, store=SQLiteStore(path))
    for values in CR_VALUES[:3]:
        ask(first.client, KEY_A, CURRENT_RATIO, values)
    first.app.state.dashboard.tracker.stop()  # as the server's shutdown does: one last sample

    again = make(AUTH, store=SQLiteStore(path))  # a new server process on the same store
    c = again.client
    login(c, KEY_ADMIN)
    for unit in ("minute", "hour"):
        page = c.get(f"/dashboard?tenant=a&unit={unit}").text
        assert f"requests per {unit}: 3 in the window" in page
    ask(c, KEY_A, CURRENT_RATIO, CR_VALUES[3])
    assert "requests per minute: 4 in the window" in c.get("/dashboard?tenant=a").text


# -- a real browser ---------------------------------------------------------------------------


def _chromium():
    """A headless Chromium through Debian's chromedriver, or a skip (a failure when CI=true)."""
    reason = None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        reason = "selenium is not installed (pip install -e '.[test]')"
    driver_path = shutil.which("chromedriver")
    if reason is None and driver_path is None:
        reason = "chromedriver not found: apt-get install chromium chromium-driver (scripts/setup.sh does it as root)"
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"the browser test cannot run in CI: {reason}")
        pytest.skip(reason)
    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    binary = shutil.which("chromium")
    if binary:
        options.binary_location = binary
    # An explicit driver path: selenium-manager never looks for (or downloads) a driver.
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module's browser tests (it takes seconds to start)."""
    driver = _chromium()
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium):
    """The shared Chromium with no cookies: every test logs in afresh (cookies ignore the port, so
    a login on one test server would otherwise be sent to the next one)."""
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    yield chromium
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})


def follow(browser, element) -> None:
    """Click a link or submit button and wait until the browser has left the page it was on.

    A click returns before the navigation it starts has finished, so a lookup right after it can
    read the old page (or none, mid-load); CI saw exactly that after #confirm."""
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.ui import WebDriverWait

    element.click()
    WebDriverWait(browser, 15).until(staleness_of(element))
    WebDriverWait(browser, 15).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


@pytest.mark.browser
def test_in_a_real_browser_login_groups_entry_invalidate_and_tenant_isolation(
    tmp_path, sandbox, browser
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    mc = MiniCache(
        FakeTarget(),
        FakeSmall(),
        store=SQLiteStore(tmp_path / "mc.db"),
        embedder=HashEmbedder(),
        sandbox=sandbox,
        config=EngineConfig(
            background_builds=False, verify=VerifyConfig(probation=0), build_early=0
        ),
    )
    try:
        with (
            BackgroundServer(create_app(mc, AUTH)) as server,
            httpx.Client(base_url=server.url) as http,
        ):
            routes = [ask(http, KEY_A, CURRENT_RATIO, v)["route"] for v in CR_VALUES[:5]]
            routes += [ask(http, KEY_A, SIMPLE_INTEREST, v)["route"] for v in SI_VALUES[:2]]
            assert routes == ["miss", "miss", "miss", "hit", "hit", "miss", "miss"]
            [entry] = mc.store.list_entries("a", "active")

            def text(css: str) -> str:
                return browser.find_element(By.CSS_SELECTOR, css).text

            def log_in(key: str) -> None:
                browser.get(server.url + "/dashboard")
                assert "/dashboard/login" in browser.current_url
                browser.find_element(By.ID, "key").send_keys(key)
                follow(browser, browser.find_element(By.ID, "login"))
                assert key not in browser.current_url

            log_in(KEY_ADMIN)
            heading = browser.find_element(By.TAG_NAME, "h1").text
            assert heading.startswith("Overview tenant a")  # the busiest tenant, not "default"
            browser.get(server.url + "/dashboard?tenant=a")
            assert text("#stat-requests") == "7" and text("#stat-hit-rate") == "28.6%"
            assert browser.find_element(
                By.CSS_SELECTOR, "svg#chart rect.seg-hit"
            )  # the hits drawn this minute
            # The overview refreshes itself: a new request shows without a reload.
            assert ask(http, KEY_A, CURRENT_RATIO, CR_VALUES[6])["route"] == "hit"
            WebDriverWait(browser, 15).until(lambda d: text("#stat-requests") == "8")
            assert "updated" in text("#live-status")

            browser.get(server.url + "/dashboard/groups?tenant=a")
            rows = browser.find_elements(By.CSS_SELECTOR, "#groups tbody tr")
            assert len(rows) == 2
            cached = browser.find_element(By.CSS_SELECTOR, f'tr[data-group="{entry.group_id}"]')
            assert "cached" in cached.text and "3" in cached.text
            assert "current assets are $# and current liabilities are $#" in cached.text
            follow(browser, cached.find_element(By.CSS_SELECTOR, "a.entry-link"))
            assert text("#entry-id") == entry.id and text("#entry-status") == "active"
            program = text("#program")
            assert "def solve(" in program and "current_assets" in program
            assert "current_liabilities" in text("#template")

            follow(browser, browser.find_element(By.ID, "invalidate"))
            assert "Invalidate entry" in browser.find_element(By.TAG_NAME, "h1").text
            follow(browser, browser.find_element(By.ID, "confirm"))
            assert text("#entry-status") == "evicted"
            assert mc.store.get_entry("a", entry.id).status == "evicted"
            browser.get(server.url + "/dashboard/groups?tenant=a")
            row = browser.find_element(By.CSS_SELECTOR, f'tr[data-group="{entry.group_id}"]')
            assert "cached" not in row.text and "(evicted)" in row.text
            assert not browser.find_elements(By.CSS_SELECTOR, ".b-cached")

            browser.get(server.url + "/dashboard/events?tenant=a")
            feed = text("#events")
            assert "build" in feed and entry.id in feed
            ask(
                http, KEY_A, CURRENT_RATIO, CR_VALUES[5]
            )  # a miss now, then (3 examples again) a build
            browser.implicitly_wait(0)
            builds = "#event-rows tr.ev-build"
            WebDriverWait(browser, 10).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, builds)) >= 2
            )

            follow(browser, browser.find_element(By.ID, "logout"))
            log_in(KEY_B)
            browser.get(server.url + f"/dashboard/entries/{entry.id}?tenant=a")
            assert "cannot open the pages of tenant 'a'" in text("#error")
            assert "current_assets" not in browser.page_source
            browser.get(server.url + "/dashboard/groups?tenant=a")
            assert "cannot open the pages of tenant 'a'" in text("#error")
            browser.get(server.url + "/dashboard/groups")
            assert browser.find_element(By.ID, "no-groups")
    finally:
        mc.close()


@pytest.mark.browser
def test_in_a_real_browser_the_overview_shows_the_requests_served_before_a_restart(
    make, tmp_path, browser
):
    from selenium.webdriver.common.by import By

    path = tmp_path / "restarted.db"
    first = make(AUTH, store=SQLiteStore(path))
    with (
        BackgroundServer(first.app) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        routes = [ask(http, KEY_A, CURRENT_RATIO, v)["route"] for v in CR_VALUES[:3]]
        assert routes == ["miss", "miss", "miss"]
    # Leaving the block shuts the server down, and its shutdown takes the sampler's last sample.

    again = make(AUTH, store=SQLiteStore(path))  # a new server process on the same store file

    def read(script: str) -> str:
        """One script, not a lookup then a read: the overview's live refresh replaces its chart
        every few seconds, and an element found before a refresh is stale after it."""
        return browser.execute_script(f"return {script}")

    def chart_label() -> str:
        return read("document.getElementById('chart').getAttribute('aria-label')")

    with (
        BackgroundServer(again.app) as server,
        httpx.Client(base_url=server.url) as http,
    ):
        browser.get(server.url + "/dashboard")
        assert "/dashboard/login" in browser.current_url
        browser.find_element(By.ID, "key").send_keys(KEY_ADMIN)
        follow(browser, browser.find_element(By.ID, "login"))
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Overview tenant a")
        assert chart_label() == "requests per minute: 3 in the window"
        assert "in this window: 3 requests" in read(
            "document.querySelector('p.legend').textContent"
        )
        assert browser.find_elements(By.CSS_SELECTOR, "svg#chart rect.seg-miss")

        follow(browser, browser.find_element(By.LINK_TEXT, "per hour"))
        assert chart_label() == "requests per hour: 3 in the window"
        # The new server's requests add to the history of the one before.
        assert ask(http, KEY_A, CURRENT_RATIO, CR_VALUES[3])["route"] == "hit"
        browser.refresh()
        assert chart_label() == "requests per hour: 4 in the window"
