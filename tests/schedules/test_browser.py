"""Pause, resume and run now on the schedules page, in real headless Chromium."""

from __future__ import annotations

import pytest

from echomq_django import conf, schedules
from echomq_django.engine.scheduler import Scheduler
from tests.admin.test_browser import ARTIFACTS, admin_user, browser, log_in  # noqa: F401
from tests.django import settings as django_settings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scheduler(settings, valkey_server):
    """The app on the suite's Valkey, flushed. Not through ``server``/``url``: overriding a
    session fixture in one module confuses pytest's cache for the parametrized ones."""
    valkey_server.command("FLUSHALL")
    settings.ECHOMQ = {"URL": valkey_server.url, "SCHEDULES": {"nightly": {
        "task": "tests.django.tasks.add", "cron": "0 3 * * *", "timezone": "Europe/Paris",
        "args": [1, 2]}}}  # fmt: skip
    settings.TASKS = django_settings.TASKS
    conf.reset()
    scheduler = Scheduler(conf.get_jobs())
    scheduler.sync(schedules.declared())  # what a reaper does when it starts
    yield scheduler
    conf.reset()


def test_operator_pauses_runs_and_resumes_a_schedule(
    scheduler,
    admin_user,  # noqa: F811  (the fixture imported from tests.admin)
    live_server,
    browser,  # noqa: F811
):
    page = log_in(browser, live_server)
    page.goto(f"{live_server.url}/admin/echomq/")
    page.get_by_role("link", name="Schedules").click()
    row = page.locator('tr[data-schedule="default/nightly"]')
    assert "0 3 * * *" in row.inner_text() and "Europe/Paris" in row.inner_text()
    assert row.locator("[data-status]").inner_text().strip() == "active"

    row.get_by_role("button", name="Pause").click()
    assert "paused" in page.locator("ul.messagelist").inner_text()
    assert row.locator("[data-status]").inner_text().strip() == "paused"
    assert scheduler.get("default", "nightly").status == "paused"

    row.get_by_role("button", name="Run now").click()
    assert "enqueued" in page.locator("ul.messagelist").inner_text()
    assert row.locator("[data-last-job] .emq-badge").inner_text().strip().lower() == "pending"
    page.screenshot(path=str(ARTIFACTS / "admin-schedules.png"), full_page=True)
    row.locator("[data-last-job] a").click()  # the last job's detail page
    assert page.locator(".emq-badge").inner_text().strip().lower() == "pending"
    page.go_back()

    row.get_by_role("button", name="Resume").click()
    assert "resumed" in page.locator("ul.messagelist").inner_text()
    assert row.locator("[data-status]").inner_text().strip() == "active"
    assert scheduler.get("default", "nightly").next_ms is not None
