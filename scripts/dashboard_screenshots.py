"""Screenshots of every dashboard page, on a short stream of real requests through the embedded models.

    .venv/bin/python scripts/dashboard_screenshots.py [--groups 2 --per-group 4] [--out docs/dashboard]

Serves ``create_app`` over ``MiniCache.local`` (the embedded GGUF models, a fresh SQLite store) on a
loopback port, sends the Formula stream ``minicache run`` uses through ``POST /v1/solve`` with a
tenant's key, waits for the builds, then logs in with an admin key in a headless Chromium (Debian's
``chromium`` + ``chromium-driver``, through selenium) and saves one full-page PNG per page.
``--store`` keeps the store (and reuses its entries: a second run streams on a warm cache).

``--fake`` serves the tests' fake models instead (tests/fakes.py: two formulas whose programs the
fake target writes at once), so the pages show a run with hits in seconds on any machine; the
committed screenshots say which mode made them (docs/dashboard.md).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

from minicache.engine import MiniCache
from minicache.server import ServerConfig, create_app
from minicache.server.testing import BackgroundServer
from minicache_bench.mainjob import formula_stream

TENANT_KEY, ADMIN_KEY, TENANT = "sk-demo-team-a-0001", "sk-demo-admin-0001", "team-a"


def browser(width: int = 1280):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        sys.exit("chromedriver not found: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},900",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


def shoot(driver, url: str, path: Path, width: int = 1280) -> None:
    """Open ``url`` and save the whole page (the window grown to the page's height)."""
    driver.get(url)
    time.sleep(0.5)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height + 160, 600), 4000))
    time.sleep(0.3)
    driver.save_screenshot(str(path))
    driver.set_window_size(width, 900)
    print(f"  {path} ({url})", file=sys.stderr)


def stream(http: httpx.Client, groups: int, per_group: int, max_s: float) -> None:
    """The requests one by one; none is started after ``max_s`` seconds (the pages show what was served)."""
    requests = formula_stream(groups, per_group)
    print(f"streaming {len(requests)} requests ({groups} formulas x {per_group})", file=sys.stderr)
    start = time.monotonic()
    for i, req in enumerate(requests, 1):
        if time.monotonic() - start > max_s:
            print(f"  stopping after {i - 1} requests: --max-minutes reached", file=sys.stderr)
            break
        began = time.perf_counter()
        r = http.post(
            "/v1/solve",
            json={"question": req.question, "context": req.context},
            headers={"Authorization": f"Bearer {TENANT_KEY}"},
        )
        body = r.json()
        route = body.get("route") if r.status_code == 200 else f"HTTP {r.status_code}: {body}"
        print(
            f"  {i:2d}/{len(requests)} {route} {time.perf_counter() - began:6.1f}s  {req.group}",
            file=sys.stderr,
        )


def fake_engine(store: str) -> MiniCache:
    """The tests' fakes behind the engine the tests' dashboard rig uses (builds in the request)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fakes import FakeSmall, FakeTarget, HashEmbedder
    from minicache.config.engine import VerifyConfig
    from minicache.engine import EngineConfig

    config = EngineConfig(background_builds=False, verify=VerifyConfig(probation=0), build_early=0)
    return MiniCache(FakeTarget(), FakeSmall(), store, embedder=HashEmbedder(), config=config)


def fake_stream(http: httpx.Client) -> None:
    """Two formulas the fakes know, ten requests each: three misses and a build, then hits."""
    from fakes import CR_VALUES, CURRENT_RATIO, SI_VALUES, SIMPLE_INTEREST

    for domain, values in ((CURRENT_RATIO, CR_VALUES), (SIMPLE_INTEREST, SI_VALUES)):
        for v in values:
            r = http.post(
                "/v1/solve",
                json={"question": domain.ask(*v)},
                headers={"Authorization": f"Bearer {TENANT_KEY}"},
            )
            print(f"  {r.json().get('route', r.status_code)}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--per-group", type=int, default=4)
    parser.add_argument("--out", default="docs/dashboard")
    parser.add_argument("--store", help="SQLite path to keep (default: a temporary one)")
    parser.add_argument("--fake", action="store_true", help="the tests' fake models (seconds)")
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=120.0,
        help="start no request after this long, and wait for builds no longer than that",
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = args.store or str(
        Path(tempfile.mkdtemp(prefix="minicache-dashboard-")) / "minicache.db"
    )

    config = ServerConfig(api_keys={TENANT_KEY: TENANT}, admin_keys={ADMIN_KEY}, rate_per_s=0)
    with (
        fake_engine(store) if args.fake else MiniCache.local(store=store) as mc,
        BackgroundServer(create_app(mc, config)) as server,
        httpx.Client(base_url=server.url, timeout=3600) as http,
    ):
        began = time.monotonic()
        if args.fake:
            fake_stream(http)
        else:
            stream(http, args.groups, args.per_group, args.max_minutes * 60)
        try:  # a build still running when time is up shows as "building"
            mc.wait_for_builds(
                timeout=max(60.0, args.max_minutes * 60 - (time.monotonic() - began))
            )
        except TimeoutError:
            print("  a build is still running: the pages show it as building", file=sys.stderr)
        time.sleep(6)  # one more tick of the dashboard's sampler
        entries = mc.store.list_entries(TENANT)
        driver = browser()
        try:
            base = server.url + "/dashboard"
            shoot(driver, base + "/login", out / "login.png")
            driver.find_element("id", "key").send_keys(ADMIN_KEY)
            driver.find_element("id", "login").click()
            shoot(driver, f"{base}?tenant={TENANT}", out / "overview.png")
            shoot(driver, f"{base}/groups?tenant={TENANT}", out / "groups.png")
            if entries:
                best = max(entries, key=lambda e: (e.status == "active", e.hits))
                shoot(driver, f"{base}/entries/{best.id}?tenant={TENANT}", out / "entry.png")
            else:
                print("  no entry was built: no entry page to show", file=sys.stderr)
            shoot(driver, f"{base}/events?tenant={TENANT}", out / "events.png")
        finally:
            driver.quit()
        stats = mc.stats(TENANT)
        print(
            f"done: {stats['requests']} requests, {stats['hits']} hits, {stats['builds_ok']} builds ok, "
            f"{stats['builds_failed']} failed; store {store}",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
