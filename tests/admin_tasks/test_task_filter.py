"""The admin's lists by task: filter, per-task counts, search by task name, newest first."""

from __future__ import annotations

import pytest

from tests.admin import seed
from tests.admin.test_views import ROOT, list_url, messages_of

pytestmark = pytest.mark.django_db


def next_ms(jobs) -> None:
    """Return once the server's clock has moved past the current millisecond."""

    def now_ms() -> int:
        seconds, micros = jobs.connector.client.time()
        return seconds * 1000 + micros // 1000

    start = now_ms()
    while now_ms() <= start:
        pass


def test_a_list_filters_by_task_and_counts_each_task(jobs, superuser):
    cards = seed.enqueue(jobs, "emails", 3)
    mails = [jobs.enqueue("emails", seed.new_job(n, task="shop.tasks.mail")).id for n in range(2)]
    page = superuser.get(list_url("emails", "pending") + "?task=shop.tasks.mail")
    assert [r.id for r in page.context["rows"]] == mails
    assert page.context["total"] == 2
    assert dict(page.context["task_counts"]) == {"shop.tasks.charge_card": 3, "shop.tasks.mail": 2}
    html = page.content.decode()
    assert 'id="emq-task-filter">shop.tasks.mail<' in html
    assert "?order=oldest&amp;task=shop.tasks.charge_card" in html  # the other task, one click
    unfiltered = superuser.get(list_url("emails", "pending"))
    assert [r.id for r in unfiltered.context["rows"]] == [*cards, *mails]


def test_a_filtered_list_pages_within_the_task(jobs, superuser):
    mails = [jobs.enqueue("emails", seed.new_job(n, task="shop.tasks.mail")).id for n in range(60)]
    seed.enqueue(jobs, "emails", 5)
    second = superuser.get(list_url("emails", "pending") + "?task=shop.tasks.mail&page=2")
    assert [r.id for r in second.context["rows"]] == mails[50:]
    assert second.context["pages"] == 2
    assert "task=shop.tasks.mail&amp;page=1" in second.content.decode()


def test_completed_and_dead_open_newest_first(jobs, superuser):
    done = []
    for _ in range(3):  # one by one, each in a later ms of the server's clock: distinct scores
        done += seed.completed(jobs, "emails")
        next_ms(jobs)
    page = superuser.get(list_url("emails", "completed"))
    assert page.context["order"] == "newest"
    assert [r.id for r in page.context["rows"]] == done[::-1]
    oldest = superuser.get(list_url("emails", "completed") + "?order=oldest")
    assert [r.id for r in oldest.context["rows"]] == done
    assert superuser.get(list_url("emails", "pending")).context["order"] == "oldest"


def test_search_by_task_name_lists_the_places_holding_it(jobs, superuser):
    seed.enqueue(jobs, "emails", 2)
    seed.dead(jobs, "default", 1)
    found = superuser.get(f"{ROOT}search/?id=shop.tasks.charge_card")
    assert found.status_code == 200
    assert [(q, s, n) for q, s, n, _ in found.context["found"]] == [
        ("default", "dead", 1),
        ("emails", "pending", 2),
    ]
    assert "/queues/emails/pending/?task=shop.tasks.charge_card" in found.content.decode()
    nothing = superuser.get(f"{ROOT}search/?id=shop.tasks.nope", follow=True)
    assert any("no job of a task by that name" in m for m in messages_of(nothing))


def test_the_pages_name_a_favicon_that_exists(jobs, superuser):
    from django.contrib.staticfiles import finders

    page = superuser.get(ROOT).content.decode()
    assert 'rel="icon" href="/static/echomq/favicon.svg"' in page
    assert finders.find("echomq/favicon.svg")
