"""The example project's demo pages: enqueue from a view, watch the status by id."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from echomq_django.engine.worker import Worker
from echomq_django.execution import execute

pytestmark = pytest.mark.django_db


def run_worker(jobs) -> None:
    Worker(jobs, ["default", "emails", "slow"], execute, burst=True, idle_block_s=0.2).run()


def test_form_enqueues_and_the_status_page_follows_the_task(client, jobs):
    response = client.post(reverse("demo:index"), {"email": "ada@example.com"})
    assert response.status_code == 302
    result_id = response.url.rstrip("/").rsplit("/", 1)[-1]
    assert jobs.get("emails", result_id).state == "pending"

    page = client.get(response.url)
    assert page.status_code == 200 and b"project.demo.tasks.send_welcome" in page.content
    status_url = reverse("demo:status_json", args=[result_id])
    waiting = client.get(status_url).json()
    assert (waiting["status"], waiting["place"], waiting["next_run_at"]) == (
        "READY",
        "pending",
        None,
    )

    run_worker(jobs)
    data = client.get(status_url).json()
    assert data["status"] == "SUCCESSFUL" and data["is_finished"]
    assert data["return_value"] == "welcome mail queued for ada@example.com"
    assert data["attempts"] == 1 and data["errors"] == []


def test_the_status_page_says_the_admins_place_and_when_a_scheduled_job_runs(client, jobs):
    response = client.post(reverse("demo:index"), {"action": "scheduled"})
    data = client.get(
        reverse("demo:status_json", args=[response.url.rstrip("/").rsplit("/", 1)[-1]])
    ).json()
    assert (data["status"], data["place"]) == ("READY", "scheduled")
    assert data["next_run_at"][:19] == data["run_after"][:19]  # due at its run-after time
    page = client.get(response.url).content.decode()
    assert 'in the queue: <span data-field="place">scheduled</span>' in page


def test_an_invalid_form_enqueues_nothing(client, jobs):
    response = client.post(reverse("demo:index"), {"email": "not an address"})
    assert response.status_code == 200 and b"Enter a valid email address" in response.content
    assert jobs.queues() == []


@pytest.mark.parametrize(
    ("action", "task", "queue", "state"),
    [
        ("fast", "project.demo.tasks.add", "default", "pending"),
        ("slow", "project.demo.tasks.slow", "slow", "pending"),
        ("failing", "project.demo.tasks.always_fails", "default", "pending"),
        ("unreliable", "project.demo.tasks.unreliable", "default", "pending"),
        ("scheduled", "project.demo.tasks.add", "default", "scheduled"),
        ("async", "project.demo.tasks.fetch", "default", "pending"),
    ],
)
def test_each_button_enqueues_its_task(client, jobs, action, task, queue, state):
    response = client.post(reverse("demo:index"), {"action": action})
    assert response.status_code == 302
    row = jobs.get(queue, response.url.rstrip("/").rsplit("/", 1)[-1])
    assert (row.task, row.state) == (task, state)


def test_batch_enqueues_a_hundred(client, jobs):
    response = client.post(reverse("demo:index"), {"action": "batch"}, follow=True)
    assert b"Enqueued 100 jobs" in response.content
    assert jobs.stats("default").counts["pending"] == 100


def test_unknown_action_and_unknown_ids(client, jobs):
    response = client.post(reverse("demo:index"), {"action": "rm -rf"}, follow=True)
    assert b"Unknown action" in response.content
    for bad in ["nope", "01a2271e-651b-7c4f-a55c-0798479ca884", "{default}"]:
        assert client.get(reverse("demo:status", args=[bad])).status_code == 404
        assert client.get(reverse("demo:status_json", args=[bad])).status_code == 404


def test_failed_task_shows_its_errors(client, jobs):
    from project.demo import tasks

    result = tasks.always_fails.enqueue("kaboom")
    for _ in range(3):  # backoff=2 s: run each retry now instead of waiting
        run_worker(jobs)
        if jobs.get("default", result.id).state == "scheduled":
            jobs.run_now("default", result.id)
    data = client.get(reverse("demo:status_json", args=[result.id])).json()
    assert data["status"] == "FAILED" and data["attempts"] == 3
    assert [e["exception_class_path"] for e in data["errors"]] == ["builtins.RuntimeError"] * 3
    assert b"RuntimeError: kaboom" in client.get(reverse("demo:status", args=[result.id])).content


def test_the_status_page_links_to_the_job_in_the_admin(client, jobs):
    response = client.post(reverse("demo:index"), {"action": "fast"})
    result_id = response.url.rstrip("/").rsplit("/", 1)[-1]
    admin_url = reverse("admin:echomq_job", kwargs={"queue": "default", "job_id": result_id})
    assert admin_url.encode() in client.get(response.url).content


def test_the_pages_cli_hints_run_with_the_venvs_python(client):
    """A new user copies the hint into a terminal where ``python`` is not the venv's."""
    home = (
        Path(__file__).parents[2] / "project" / "templates" / "home.html"
    )  # not in these settings
    for page in (home.read_text(), client.get(reverse("demo:index")).content.decode()):
        assert ".venv/bin/python manage.py" in page and "<code>python manage.py" not in page
