"""How fast is the admin's list page with a million jobs in one set?

    python bench/admin_page.py                 # 10^6 pending jobs on an embedded Valkey
    python bench/admin_page.py --jobs 200000   # a smaller run
    python bench/admin_page.py --url redis://127.0.0.1:6390/0   # a server of yours (FLUSHed!)

Fills one queue's pending set with pipelined ``enqueue_many`` (each job still its
own script call), then times the list page through Django's test client, logged
in as a superuser: the first page, the newest-first page, a page in the middle
and the last page, plus the dashboard. The page reads one ZRANGE with offsets and
one HMGET per shown row, so its cost does not grow with the set; this prints the
figures to show it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUEUE = "bench-admin"
BATCH = 10_000
urlpatterns: list = []  # this module is the URLconf: the admin at /admin/ (set once Django is up)


def configure(url: str) -> None:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-only",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        USE_TZ=True,
        INSTALLED_APPS=[
            "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
            "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
            "echomq_django",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[{
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]},
        }],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        STATIC_URL="/static/",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        ECHOMQ={"URL": url, "QUEUES": [QUEUE]},
    )  # fmt: skip
    django.setup()
    from django.contrib import admin
    from django.urls import path

    urlpatterns.append(path("admin/", admin.site.urls))


def fill(jobs, total: int) -> float:
    """Enqueue ``total`` jobs in pipelined batches; returns jobs per second."""
    from echomq_django.engine.jobs import NewJob
    from echomq_django.payload import Payload

    body = Payload(task="bench.tasks.noop", args=[1], kwargs={}, backend="default").dumps()
    started = time.perf_counter()
    for done in range(0, total, BATCH):
        count = min(BATCH, total - done)
        jobs.enqueue_many(
            QUEUE, [NewJob(payload=body, task="bench.tasks.noop") for _ in range(count)]
        )
        print(f"\r  enqueued {done + count:>9,} / {total:,}", end="", flush=True)
    print()
    return total / (time.perf_counter() - started)


def timed(client, url: str, runs: int) -> tuple[float, float]:
    """Median and worst wall time (ms) of ``runs`` GETs of ``url``; each must be a 200."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--url", help="use this server (it is FLUSHed) instead of an embedded one")
    args = parser.parse_args()

    server = None
    if args.url is None:
        from echomq_django.devserver import EmbeddedServer

        server = EmbeddedServer().start()
    url = args.url or server.url
    try:
        configure(url)
        from django.contrib.auth.models import User
        from django.core.management import call_command
        from django.test import Client

        from echomq_django import conf

        call_command("migrate", verbosity=0)
        client = Client()
        client.force_login(User.objects.create_superuser("bench", "b@example.com", "pw"))
        jobs = conf.get_jobs()
        jobs.connector.client.flushall()
        print(f"server {conf.get_settings().safe_url}: filling {QUEUE}/pending")
        rate = fill(jobs, args.jobs)
        memory = jobs.connector.client.info("memory")["used_memory_human"]
        print(f"  {rate:,.0f} jobs/s enqueued (pipelined), server memory {memory}")

        base = f"/admin/echomq/queues/{QUEUE}/pending/"
        pages = -(-args.jobs // 50)
        cases = {
            "first page (oldest first)": base,
            "first page (newest first)": base + "?order=newest",
            f"middle page ({pages // 2:,})": base + f"?page={pages // 2}",
            f"last page ({pages:,})": base + f"?page={pages}",
            "dashboard": "/admin/echomq/",
        }
        print(f"{args.runs} runs each, Django test client, {args.jobs:,} jobs in one set:")
        worst = 0.0
        for name, page in cases.items():
            median, slowest = timed(client, page, args.runs)
            worst = max(worst, median)
            print(f"  {name:<28} median {median:7.1f} ms   max {slowest:7.1f} ms")
        verdict = "under" if worst < 500 else "OVER"
        print(f"slowest median {worst:.1f} ms: {verdict} the 500 ms budget")
        return 0 if worst < 500 else 1
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
