"""The admin in real headless Chromium, against pytest-django's live server.

Needs the ``playwright`` package and a system Chromium (Debian: ``apt-get install
chromium``; ``scripts/bootstrap --with-browser`` does it). Browser downloads do
not work here, so Playwright drives ``/usr/bin/chromium`` (or $ECHOMQ_CHROMIUM).
Screenshots of every step land in tests/artifacts/ (gitignored). With
ECHOMQ_DOC_SCREENSHOTS=1 the README's screenshots in docs/screenshots/ are
written again from the demo data.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import seed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
DOCS = REPO / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
PASSWORD = "browser-pw"


def chromium_path() -> str | None:
    for candidate in (os.environ.get("ECHOMQ_CHROMIUM"), "chromium", "chromium-browser"):
        found = candidate and shutil.which(candidate)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def server(valkey_server):
    """One server is enough here: the view tests cover both kinds."""
    return valkey_server


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed"
    )
    executable = chromium_path()
    if executable is None:
        pytest.skip("no system Chromium (apt-get install chromium, or set ECHOMQ_CHROMIUM)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # Playwright's sync API keeps an event loop in this thread; the ORM calls that
    # fixtures make between browser steps are plain synchronous code all the same.
    with pytest.MonkeyPatch.context() as patch, sync_api.sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("operator", "op@example.com", PASSWORD)


def log_in(browser, live_server, *, scheme: str = "light", width: int = 1280):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
    return page


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"admin-{name}.png"), full_page=True)


def test_operator_retries_a_dead_job(jobs, admin_user, live_server, browser):
    (job_id,) = seed.dead(jobs, "emails")
    seed.completed(jobs, "emails", 2)
    seed.enqueue(jobs, "emails", 3)
    page = log_in(browser, live_server)

    page.get_by_role("link", name="EchoMQ", exact=True).first.click()
    page.wait_for_url(f"{live_server.url}/admin/echomq/")
    row = page.locator("table.emq-queues tbody tr", has_text="emails")
    assert row.locator("a.emq-state-pending").inner_text() == "3"
    shot(page, "1-dashboard")

    row.locator("a.emq-state-dead").click()
    assert page.locator("#emq-job-list tbody tr").count() == 1
    shot(page, "2-dead-list")

    page.get_by_role("link", name=job_id).click()
    assert page.locator(".emq-badge").inner_text().strip().lower() == "dead"
    assert "raise PaymentDeclined" in page.locator(".emq-traceback").first.inner_text()
    shot(page, "3-dead-job")

    page.get_by_role("button", name="Retry").click()
    assert "moved to pending" in page.locator("ul.messagelist").inner_text()
    assert page.locator(".emq-badge").inner_text().strip().lower() == "pending"
    shot(page, "4-retried")

    page.locator(".emq-jobhead").get_by_role("link", name="emails").click()  # its list
    page.locator("a.emq-tab.emq-state-dead").click()
    assert page.locator("#emq-job-list").count() == 0
    assert "Nothing dead" in page.locator("#content-main").inner_text()
    shot(page, "5-dead-list-empty")
    assert jobs.get("emails", job_id).state == "pending"


def test_confirmed_purge_from_the_list(jobs, admin_user, live_server, browser):
    seed.dead(jobs, "emails", 3)
    page = log_in(browser, live_server)
    page.goto(f"{live_server.url}/admin/echomq/queues/emails/dead/")
    page.get_by_role("link", name="Purge dead").click()
    shot(page, "purge-confirm")
    assert jobs.stats("emails").counts["dead"] == 3  # asking changed nothing
    page.get_by_role("button", name="Yes, purge dead").click()
    assert "3 dead jobs purged." in page.locator("ul.messagelist").inner_text()
    assert jobs.stats("emails").counts["dead"] == 0


def test_auto_refresh_updates_the_figures_in_place(jobs, admin_user, live_server, browser):
    page = log_in(browser, live_server)
    page.clock.install()
    page.goto(f"{live_server.url}/admin/echomq/")
    pending = page.locator("table.emq-queues tbody tr", has_text="emails").locator(
        "a.emq-state-pending"
    )
    assert pending.inner_text() == "0"
    page.get_by_label("Auto-refresh").check()
    seed.enqueue(jobs, "emails", 4)
    page.clock.run_for(6000)
    pending.filter(has_text="4").wait_for(timeout=5000)
    assert page.get_by_label("Auto-refresh").is_checked()  # the toggle is outside the swap
    page.reload()
    assert page.get_by_label("Auto-refresh").is_checked()  # remembered by the browser


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_demo_screenshots(jobs, admin_user, live_server, browser, scheme):
    """The dashboard with several queues, a chart and workers; a dead job's traceback."""
    dead = seed.populate(jobs)
    page = log_in(browser, live_server, scheme=scheme)
    page.goto(f"{live_server.url}/admin/echomq/")
    assert page.locator("table.emq-queues tbody tr").count() == 4
    assert page.locator("svg.emq-chart rect.emq-done").count() >= 55
    assert "batch-1.shop:5120" in page.locator("#emq-workers + table").inner_text()
    shot(page, f"dashboard-{scheme}")
    write_doc = scheme == "light" and os.environ.get("ECHOMQ_DOC_SCREENSHOTS") == "1"
    if write_doc:
        DOCS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS / "dashboard.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/echomq/queues/payments/jobs/{dead['payments'][0]}/")
    assert page.locator(".emq-traceback").count() == 3  # one per attempt
    assert page.locator(".emq-error[open] .emq-traceback").is_visible()  # the last one
    shot(page, f"job-{scheme}")
    if write_doc:
        page.screenshot(path=str(DOCS / "job-detail.png"), full_page=True)


@pytest.mark.parametrize("state", ["pending", "dead"])
def test_lists_fit_a_420_px_screen(jobs, admin_user, live_server, browser, state):
    """On a phone the page itself never scrolls sideways: a wide table scrolls in its panel."""
    seed.dead(jobs, "emails", 3)
    seed.enqueue(jobs, "emails", 3)
    page = log_in(browser, live_server, width=420)
    page.goto(f"{live_server.url}/admin/echomq/queues/emails/{state}/")
    assert page.locator("#emq-job-list tbody tr").count() == 3
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    shot(page, f"420-{state}-list")
    assert overflow <= 1
