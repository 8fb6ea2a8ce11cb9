"""The EchoMQ admin pages through Django's test client, on the suite's real servers."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from echomq_django import conf
from echomq_django.engine import registry
from echomq_django.engine.keyspace import STATES, QueueKeys

from . import seed

pytestmark = pytest.mark.django_db

ROOT = "/admin/echomq/"


def job_url(queue: str, job_id: str, action: str = "") -> str:
    return f"{ROOT}queues/{queue}/jobs/{job_id}/" + (f"{action}/" if action else "")


def list_url(queue: str, state: str) -> str:
    return f"{ROOT}queues/{queue}/{state}/"


def state_of(jobs, queue: str, job_id: str) -> str | None:
    job = jobs.get(queue, job_id)
    return job.state if job else None


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


# -- the pages -----------------------------------------------------------------------------


def test_admin_index_links_the_dashboard(jobs, superuser):
    page = superuser.get("/admin/").content.decode()
    assert 'href="/admin/echomq/"' in page
    assert "EchoMQ" in page
    assert superuser.get("/admin/echomq/queue/")["Location"] == ROOT  # the model row


@pytest.mark.parametrize("page", ["add/", "1/change/", "1/delete/", "1/history/", "1/"])
def test_the_tableless_model_has_no_other_pages(jobs, superuser, page):
    assert superuser.get(f"/admin/echomq/queue/{page}").status_code == 404


def test_dashboard_shows_queues_counts_throughput_and_workers(jobs, superuser):
    seed.dead(jobs, "payments", 2)
    seed.completed(jobs, "emails", 3)
    seed.enqueue(jobs, "emails", 4)
    seed.add_worker(jobs, "web-1.shop:4101", ["emails"], 8, 2)
    seed.add_worker(jobs, "web-2.shop:77", ["emails", "payments"], 4, 1,
                    sizes={"payments": 1}, processes=2)  # fmt: skip

    response = superuser.get(ROOT)
    page = response.content.decode()
    assert response.status_code == 200
    names = [q.name for q in response.context["queues"]]
    assert names == ["default", "emails", "payments"]  # configured ∪ registry
    emails = {c.state: c.count for c in response.context["queues"][1].counts}
    assert emails == {"pending": 4, "scheduled": 0, "active": 0, "completed": 3, "dead": 0}
    assert dict(response.context["totals"])["dead"] == 2
    chart = response.context["chart"]
    assert (chart.completed, chart.failed) == (3, 2)
    assert len(chart.bars) == 60 and "<svg" in page and 'class="emq-done"' in page
    assert "web-1.shop:4101" in page and "2 / 8" in page
    assert '<span class="emq-tag">payments:1</span>' in page and "1 / 4 in 2 processes" in page
    assert conf.get_settings().safe_url in page


def test_dashboard_without_workers_says_so(jobs, superuser):
    assert "No workers" in superuser.get(ROOT).content.decode()


def test_server_url_is_shown_without_its_password(settings, make_acl_server, superuser):
    acl = make_acl_server("~emq:* +@all")
    settings.ECHOMQ = {"URL": acl.url, "QUEUES": ["default"]}
    conf.reset()
    try:
        page = superuser.get(ROOT).content.decode()
    finally:
        conf.reset()
    assert acl.password not in page
    assert f"{acl.username}:***@" in page


def test_lost_server_is_a_clear_503(settings, superuser):
    from echomq_django.devserver import free_port

    settings.ECHOMQ = {"URL": f"redis://127.0.0.1:{free_port()}/0", "QUEUES": ["default"]}
    conf.reset()
    try:
        response = superuser.get(ROOT)
    finally:
        conf.reset()
    assert response.status_code == 503
    assert "cannot be reached" in response.content.decode()


@pytest.mark.parametrize("state", STATES)
def test_every_list_renders_its_place(jobs, superuser, state):
    made = {
        "pending": lambda: seed.enqueue(jobs, "emails", 2),
        "scheduled": lambda: seed.scheduled(jobs, "emails", 2),
        "active": lambda: seed.active(jobs, "emails", 2),
        "completed": lambda: seed.completed(jobs, "emails", 2),
        "dead": lambda: seed.dead(jobs, "emails", 2),
    }[state]()
    response = superuser.get(list_url("emails", state))
    assert response.status_code == 200
    assert {row.id for row in response.context["rows"]} == set(made)
    page = response.content.decode()
    for job_id in made:
        assert job_url("emails", job_id) in page
    assert "shop.tasks.charge_card" in page
    if state == "dead":
        assert seed.SUMMARY in page
        assert 'action="/admin/echomq/queues/emails/jobs/' in page  # inline retry buttons


def test_list_pages_with_offsets_both_ways(jobs, superuser):
    ids = seed.enqueue(jobs, "emails", 120)  # one priority: FIFO order is the enqueue order
    third = superuser.get(list_url("emails", "pending") + "?page=3")
    assert [r.id for r in third.context["rows"]] == ids[100:]
    assert third.context["total"] == 120 and third.context["pages"] == 3
    newest = superuser.get(list_url("emails", "pending") + "?order=newest")
    assert [r.id for r in newest.context["rows"]] == ids[::-1][:50]
    past = superuser.get(list_url("emails", "pending") + "?page=9")
    assert past.status_code == 200 and past.context["rows"] == []
    assert superuser.get(list_url("emails", "pending") + "?page=x").status_code == 200


def test_list_shows_an_entry_whose_row_is_gone(jobs, superuser):
    (job_id,) = seed.enqueue(jobs, "emails")
    jobs.connector.client.delete(QueueKeys.of("emails").job(job_id))
    response = superuser.get(list_url("emails", "pending"))
    assert response.context["rows"][0].missing
    assert "the row is gone" in response.content.decode()


def test_job_detail_shows_everything(jobs, superuser):
    (job_id,) = seed.dead(jobs, "emails", attempts=2)
    response = superuser.get(job_url("emails", job_id))
    page = response.content.decode()
    assert response.status_code == 200
    assert "shop.tasks.charge_card" in page
    assert "&quot;order&quot;: 7" in page  # kwargs, pretty JSON
    assert "shop.payments.PaymentDeclined" in page and "raise PaymentDeclined" in page
    assert "worker-1" in page and "worker-2" in page  # one worker id per attempt
    assert len(response.context["errors"]) == 2 and page.count("raise PaymentDeclined") == 2
    assert "<strong>2</strong> of 2" in page and "(token 2)" in page  # counted of max attempts
    times = {label: at for label, at, _ in response.context["times"]}
    assert times["Enqueued"] <= times["First started"] <= times["Finished"]
    assert times["Due"] is None and times["Lease deadline"] is None  # a dead job holds no lease


def test_a_retried_dead_job_counts_its_attempts_afresh(jobs, superuser):
    """After retry_dead the token keeps growing, but the budget starts again: the pages
    show the attempts that count (never "3 of 2"), and the token beside them."""
    (job_id,) = seed.dead(jobs, "emails", attempts=2)
    jobs.retry_dead("emails", [job_id])
    claim = jobs.claim("emails", "worker-3", count=1, lease_ms=60_000)
    jobs.retry(
        "emails", job_id, claim.jobs[0].token, error=seed.ERROR, summary=seed.SUMMARY, give_up=True
    )
    detail = superuser.get(job_url("emails", job_id)).content.decode()
    assert "<strong>1</strong> of 2" in detail and "(token 3)" in detail
    (row,) = superuser.get(list_url("emails", "dead")).context["rows"]
    assert (row.attempts, row.max_attempts) == (1, 2)


def test_job_detail_names_each_worker_once_with_its_runs(jobs, superuser):
    """Three attempts on one worker read as that worker x3, not its id three times."""
    job_id = jobs.enqueue("emails", seed.new_job(max_attempts=5)).id
    for _ in range(3):
        claim = jobs.claim("emails", "worker-9", count=1, lease_ms=60_000, start_now=1)
        jobs.retry("emails", job_id, claim.jobs[0].token, error=seed.ERROR,
                   summary=seed.SUMMARY, backoff_ms=0)  # fmt: skip
    page = superuser.get(job_url("emails", job_id)).content.decode()
    assert page.count(">worker-9</code>") == 1 and "×3" in page


def test_job_detail_shows_run_after_in_the_format_of_every_other_time(jobs, superuser):
    job_id = jobs.enqueue(
        "emails", seed.new_job(run_after="2031-01-02T03:04:05.250000+00:00", due_ms=1924916645250)
    ).id
    page = superuser.get(job_url("emails", job_id)).content.decode()
    assert '2031-01-02 03:04:05.250000</span> <span class="emq-quiet">as the task asked' in page
    assert 'title="2031-01-02T03:04:05.250000+00:00"' in page  # the stored text, kept


def test_job_detail_says_when_and_on_which_worker_each_error_came(jobs, superuser):
    job_id = jobs.enqueue("emails", seed.new_job(max_attempts=5)).id
    for worker in ("worker-7", "worker-8"):
        claim = jobs.claim("emails", worker, count=1, lease_ms=60_000, start_now=1)
        jobs.retry("emails", job_id, claim.jobs[0].token, error=seed.ERROR,
                   summary=seed.SUMMARY, backoff_ms=0)  # fmt: skip
    response = superuser.get(job_url("emails", job_id))
    page = response.content.decode()
    first, second = response.context["errors"]
    assert (first["worker"], second["worker"]) == ("worker-7", "worker-8")
    assert first["at"] <= second["at"] and first["at"].tzinfo is not None
    assert "· on worker-7</span>" in page and f"{second['at']:%Y-%m-%d %H:%M:%S}" in page


def test_job_detail_shows_the_result(jobs, superuser):
    (job_id,) = seed.completed(jobs, "emails")
    page = superuser.get(job_url("emails", job_id)).content.decode()
    assert "&quot;sent&quot;: true" in page


def test_corrupt_payload_still_renders(jobs, superuser):
    (job_id,) = seed.enqueue(jobs, "emails")
    jobs.connector.client.hset(QueueKeys.of("emails").job(job_id), "payload", "{not json")
    response = superuser.get(job_url("emails", job_id))
    assert response.status_code == 200
    assert "{not json" in response.content.decode()
    assert "not JSON" in response.content.decode()


def test_corrupt_row_still_renders_raw(jobs, superuser):
    (job_id,) = seed.enqueue(jobs, "emails")
    jobs.connector.client.hset(QueueKeys.of("emails").job(job_id), "state", "<b>bogus</b>")
    response = superuser.get(job_url("emails", job_id))
    page = response.content.decode()
    assert response.status_code == 200
    assert "cannot be read as a job" in page
    assert "&lt;b&gt;bogus&lt;/b&gt;" in page and "<b>bogus</b>" not in page
    assert job_url("emails", job_id, "delete") in page  # the way out of a broken row
    superuser.post(job_url("emails", job_id, "delete"), {"confirm": "yes"})
    assert not jobs.connector.client.exists(QueueKeys.of("emails").job(job_id))


def test_missing_job_is_404(jobs, superuser):
    from echomq_django.engine.keyspace import new_job_id

    assert superuser.get(job_url("emails", new_job_id())).status_code == 404


def test_search_finds_a_job_in_any_queue(jobs, superuser):
    (job_id,) = seed.dead(jobs, "payments")
    response = superuser.get(f"{ROOT}search/?id={job_id.upper()}")
    assert response["Location"] == job_url("payments", job_id)


def test_search_reports_bad_and_unknown_ids(jobs, superuser):
    from echomq_django.engine.keyspace import new_job_id

    bad = superuser.get(f"{ROOT}search/?id=../../etc", follow=True)
    assert any("is not a job id" in m for m in messages_of(bad))
    unknown = superuser.get(f"{ROOT}search/?id={new_job_id()}", follow=True)
    assert any("No job" in m for m in messages_of(unknown))


# -- ill-formed names and ids never become keys ----------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "queues/em%7Bails%7D/pending/",  # braces: another queue's hash tag
        "queues/a:b/dead/",
        "queues/-x/dead/",
        "queues/emails/nowhere/",
        "queues/emails/jobs/not-a-job-id/",
        "queues/emails/jobs/01A2271E-47D3-79E9-9E2B-6E6571E5D24B/",  # not canonical lowercase
        "queues/emails/jobs/01a2271e-47d3-49e9-9e2b-6e6571e5d24b/",  # a UUIDv4
        "queues/emails/jobs/01a2271e-47d3-79e9-9e2b-6e6571e5d24b/explode/",
        "queues/emails/actions/explode/",
        "queues/" + "q" * 101 + "/dead/",
    ],
)
def test_ill_formed_urls_are_404_without_touching_the_server(jobs, superuser, path):
    client = jobs.connector.client
    before = client.info("stats")["total_commands_processed"]
    response = superuser.get(ROOT + path)
    after = client.info("stats")["total_commands_processed"]
    assert response.status_code == 404
    assert after - before == 1  # only the first INFO itself


# -- permissions ----------------------------------------------------------------------------

PAGES = [
    "",
    "queues/emails/dead/",
    "queues/emails/jobs/{id}/",
    "queues/emails/jobs/{id}/delete/",  # the confirmation step
    "queues/emails/actions/retry-dead/",
    "search/?id={id}",
]
SEES = {"anonymous": 302, "staff": 403, "viewer": 200, "superuser": 200}


@pytest.mark.parametrize("who", SEES)
@pytest.mark.parametrize("page", PAGES)
def test_who_sees_the_pages(jobs, users, who, page):
    (job_id,) = seed.dead(jobs, "emails")
    response = users[who].get(ROOT + page.format(id=job_id))
    expected = SEES[who]
    if who == "viewer" and ("delete/" in page or "actions/" in page):
        expected = 403  # a confirmation step needs the action's permission
    if who in ("viewer", "superuser") and page.startswith("search/"):
        expected = 302  # to the job found
    assert response.status_code == expected
    if who == "anonymous":
        assert response["Location"].startswith("/admin/login/?next=")


# who -> (may change, may delete)
HOLDS = {
    "anonymous": (False, False),
    "staff": (False, False),
    "viewer": (False, False),
    "changer": (True, False),
    "deleter": (False, True),
    "superuser": (True, True),
}


@pytest.mark.parametrize("who", HOLDS)
def test_who_may_retry(jobs, users, who):
    (job_id,) = seed.dead(jobs, "emails")
    response = users[who].post(job_url("emails", job_id, "retry"))
    if HOLDS[who][0]:
        assert response.status_code == 302
        assert state_of(jobs, "emails", job_id) == "pending"
    else:
        assert response.status_code == (302 if who == "anonymous" else 403)
        assert state_of(jobs, "emails", job_id) == "dead"


@pytest.mark.parametrize("who", HOLDS)
def test_who_may_delete(jobs, users, who):
    (job_id,) = seed.dead(jobs, "emails")
    response = users[who].post(job_url("emails", job_id, "delete"), {"confirm": "yes"})
    if HOLDS[who][1]:
        assert response.status_code == 302
        assert state_of(jobs, "emails", job_id) is None
    else:
        assert response.status_code == (302 if who == "anonymous" else 403)
        assert state_of(jobs, "emails", job_id) == "dead"


@pytest.mark.parametrize("who", HOLDS)
def test_who_may_purge(jobs, users, who):
    seed.dead(jobs, "emails", 2)
    users[who].post(f"{ROOT}queues/emails/actions/purge-dead/", {"confirm": "yes"})
    assert jobs.stats("emails").counts["dead"] == (0 if HOLDS[who][1] else 2)


def test_pages_offer_only_the_actions_a_user_holds(jobs, viewer, changer):
    (job_id,) = seed.dead(jobs, "emails")
    seen = viewer.get(job_url("emails", job_id)).content.decode()
    assert "/retry/" not in seen and "/delete/" not in seen
    assert "Retry all dead" not in viewer.get(list_url("emails", "dead")).content.decode()
    held = changer.get(job_url("emails", job_id)).content.decode()
    assert "/retry/" in held and "/delete/" not in held


# -- CSRF -------------------------------------------------------------------------------------


def test_actions_need_the_csrf_token(jobs, django_user_model):
    (job_id,) = seed.dead(jobs, "emails")
    user = django_user_model.objects.create_superuser("csrf", "c@example.com", "pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    forged = client.post(job_url("emails", job_id, "retry"))
    assert forged.status_code == 403
    assert state_of(jobs, "emails", job_id) == "dead"

    page = client.get(job_url("emails", job_id)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    sent = client.post(job_url("emails", job_id, "retry"), {"csrfmiddlewaretoken": token})
    assert sent.status_code == 302
    assert state_of(jobs, "emails", job_id) == "pending"


# -- the actions ----------------------------------------------------------------------------


def test_retry_a_dead_job_and_go_back_to_the_list(jobs, superuser):
    (job_id,) = seed.dead(jobs, "emails")
    back = list_url("emails", "dead")
    response = superuser.post(job_url("emails", job_id, "retry"), {"next": back}, follow=True)
    assert response.redirect_chain[-1][0] == back
    assert messages_of(response) == [f"Job {job_id} moved to pending."]
    assert response.context["rows"] == []  # it left the dead list
    job = jobs.get("emails", job_id)
    assert (job.state, job.attempts) == ("pending", 1)  # the token never goes down


def test_next_must_stay_on_this_site(jobs, superuser):
    (job_id,) = seed.dead(jobs, "emails")
    response = superuser.post(job_url("emails", job_id, "retry"), {"next": "https://evil.example/"})
    assert response["Location"] == job_url("emails", job_id)


def test_run_now_moves_a_scheduled_job_to_pending(jobs, superuser):
    (job_id,) = seed.scheduled(jobs, "emails")
    response = superuser.post(job_url("emails", job_id, "run-now"), follow=True)
    assert "moved to pending" in messages_of(response)[0]
    assert state_of(jobs, "emails", job_id) == "pending"


@pytest.mark.parametrize("make", [seed.enqueue, seed.scheduled])
def test_cancel_a_waiting_job(jobs, superuser, make):
    (job_id,) = make(jobs, "emails")
    response = superuser.post(job_url("emails", job_id, "cancel"), follow=True)
    assert "cancelled" in messages_of(response)[0]
    job = jobs.get("emails", job_id)
    assert job.state == "dead" and job.error_list[-1]["exception_class_path"].endswith("Cancelled")


def test_delete_asks_first(jobs, superuser):
    (job_id,) = seed.dead(jobs, "emails")
    ask = superuser.get(job_url("emails", job_id, "delete"))
    assert ask.status_code == 200 and "Yes, delete" in ask.content.decode()
    unconfirmed = superuser.post(job_url("emails", job_id, "delete"))
    assert unconfirmed["Location"] == job_url("emails", job_id, "delete")
    assert state_of(jobs, "emails", job_id) == "dead"
    done = superuser.post(job_url("emails", job_id, "delete"), {"confirm": "yes"}, follow=True)
    assert messages_of(done) == [f"Job {job_id} deleted (it was dead)."]
    assert state_of(jobs, "emails", job_id) is None


def test_a_running_job_is_not_deleted_but_may_be_cancelled(jobs, superuser):
    """Deleting it could not stop its task, and would free its concurrency slot while
    the task still ran: the operator is told to cancel it."""
    (job_id,) = seed.active(jobs, "emails")
    done = superuser.post(job_url("emails", job_id, "delete"), {"confirm": "yes"}, follow=True)
    assert "is running: cancel it first" in messages_of(done)[0]
    assert state_of(jobs, "emails", job_id) == "active"


def test_retry_all_dead_reports_the_count(jobs, superuser):
    seed.dead(jobs, "emails", 3)
    url = f"{ROOT}queues/emails/actions/retry-dead/"
    ask = superuser.get(url).content.decode()
    assert "Yes, retry all dead" in ask and "Queue emails (3 dead jobs)" in ask
    response = superuser.post(url, {"confirm": "yes"}, follow=True)
    assert messages_of(response) == ["3 jobs moved to pending."]
    assert jobs.stats("emails").counts == {
        "pending": 3, "scheduled": 0, "active": 0, "completed": 0, "dead": 0,
    }  # fmt: skip


@pytest.mark.parametrize("state, make", [("dead", seed.dead), ("completed", seed.completed)])
def test_purge_a_set(jobs, superuser, state, make):
    ids = make(jobs, "emails", 4)
    seed.enqueue(jobs, "emails", 2)
    response = superuser.post(
        f"{ROOT}queues/emails/actions/purge-{state}/", {"confirm": "yes"}, follow=True
    )
    assert messages_of(response) == [f"4 {state} jobs purged."]
    assert jobs.stats("emails").counts[state] == 0
    assert jobs.stats("emails").counts["pending"] == 2
    assert all(jobs.get("emails", i) is None for i in ids)


def confirmed_bound(page: str) -> str:
    """The bound the confirmation page sends back with its form."""
    return re.search(r'<input type="hidden" name="bound" value="([^"]+)">', page).group(1)


@pytest.mark.parametrize(
    "action, says, left",
    [("purge-dead", "3 dead jobs purged.", 0), ("retry-dead", "3 jobs moved to pending.", 3)],
)
def test_a_whole_set_action_acts_on_the_jobs_its_confirmation_counted(
    jobs, superuser, action, says, left
):
    """Jobs that die while the operator reads the question are not the answer's: before,
    the count said 3 and the action took 5."""
    first = seed.dead(jobs, "emails", 3)
    url = f"{ROOT}queues/emails/actions/{action}/"
    ask = superuser.get(url).content.decode()
    assert "Queue emails (3 dead jobs)" in ask
    later = seed.dead(jobs, "emails", 2)
    response = superuser.post(url, {"confirm": "yes", "bound": confirmed_bound(ask)}, follow=True)
    assert messages_of(response) == [says]
    assert sorted(jobs.connector.client.zrange("emq:{emails}:dead", 0, -1)) == sorted(later)
    assert sum(state_of(jobs, "emails", i) == "pending" for i in first) == left


def test_a_bound_the_page_did_not_send_is_a_400_and_changes_nothing(jobs, superuser):
    seed.dead(jobs, "emails", 2)
    url = f"{ROOT}queues/emails/actions/purge-dead/"
    assert superuser.post(url, {"confirm": "yes", "bound": "2:inf:1"}).status_code == 400
    assert jobs.stats("emails").counts["dead"] == 2


@pytest.mark.parametrize(
    "action, make, says",
    [
        ("run-now", seed.enqueue, "is pending, not scheduled"),
        ("cancel", seed.completed, "is completed, not pending, scheduled or active"),
        ("retry", seed.enqueue, "is not dead"),
    ],
)
def test_wrong_state_is_a_message_not_a_500(jobs, superuser, action, make, says):
    (job_id,) = make(jobs, "emails")
    before = state_of(jobs, "emails", job_id)
    response = superuser.post(job_url("emails", job_id, action), follow=True)
    assert response.status_code == 200
    assert says in messages_of(response)[0]
    assert state_of(jobs, "emails", job_id) == before


def test_job_not_found_is_a_message_not_a_500(jobs, superuser):
    from echomq_django.engine.keyspace import new_job_id

    job_id = new_job_id()
    response = superuser.post(job_url("emails", job_id, "delete"), {"confirm": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == ROOT
    assert messages_of(response) == [f"Delete failed: Job {job_id}"]


def test_actions_refuse_get_when_they_do_not_ask_first(jobs, superuser):
    (job_id,) = seed.dead(jobs, "emails")
    assert superuser.get(job_url("emails", job_id, "retry")).status_code == 405
    assert state_of(jobs, "emails", job_id) == "dead"


def test_registry_workers_appear_and_expire(jobs, superuser):
    seed.add_worker(jobs, "web-9.shop:1", ["emails"], 2, 1)
    assert "web-9.shop:1" in superuser.get(ROOT).content.decode()
    registry.remove(jobs.connector, "web-9.shop:1")
    assert "web-9.shop:1" not in superuser.get(ROOT).content.decode()
