"""Child processes of the outbox tests: ``python -m tests.outbox.proc COMMAND``.

Run with ``DJANGO_SETTINGS_MODULE=tests.outbox.settings``, ``ECHOMQ_TEST_DB`` and
``ECHOMQ_TEST_URL``::

    seed N IDS_FILE       enqueue N jobs of tasks.add in one atomic() (the outbox mode
                          writes N rows); their ids go to IDS_FILE, one a line
    relay REPORT [...]    relay until the outbox is empty, then write {"relayed", "resent"}
                          to REPORT. --ready/--go FILE: say "ready", wait for the go file
                          (two relays start together). --pause-after-send FILE: after
                          the first send, write the sent ids to FILE and hang there
                          (the test SIGKILLs the process in that window)
    view A B              POST /order/ through Django's test client: one row and its job,
                          committed together; prints the view's JSON
    seed-unseen IDS_FILE  enqueue one job of a task no discovery loads, in atomic(); its
                          id and get_result's status after the commit go to IDS_FILE
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path


def wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            sys.exit(f"{path} never appeared")
        time.sleep(0.01)


def seed(n: int, ids_file: Path) -> None:
    from django.db import transaction

    from tests.outbox import tasks

    backend = tasks.add.get_backend()
    with transaction.atomic():
        results = backend.enqueue_many(tasks.add, [((i, i), {}) for i in range(n)])
    ids_file.write_text("".join(f"{r.id}\n" for r in results))


def seed_unseen(ids_file: Path) -> None:
    from django.db import transaction

    from tests.django.taskapp import jobs

    with transaction.atomic():
        result = jobs.parcel.enqueue(1)
    found = jobs.parcel.get_result(result.id)
    ids_file.write_text(f"{result.id} {found.status}\n")


def relay(args: argparse.Namespace) -> None:
    from echomq_django import conf
    from echomq_django.models import OutboxJob
    from echomq_django.relay import TRANSIENT, Relay

    relay = Relay(conf.get_jobs(), batch=args.batch, lease_s=args.lease, interval_s=0.02)
    if args.pause_after_send:

        def hang(ids: list[str]) -> None:
            Path(args.pause_after_send).write_text(json.dumps(ids))
            time.sleep(3600)

        relay.after_send = hang
    OutboxJob.objects.exists()  # connected before "ready"
    if args.ready:
        Path(args.ready).write_text("ready")
        wait_for(Path(args.go))
    while True:
        try:
            if not relay.step() and not OutboxJob.objects.exists():
                break
        except TRANSIENT as exc:  # SQLite's "database is locked" under a racing writer
            print(f"transient: {exc}", file=sys.stderr)
        time.sleep(0.005)
    Path(args.report).write_text(json.dumps({"relayed": relay.relayed, "resent": relay.resent}))


def view(a: int, b: int) -> None:
    from django.test import Client

    response = Client().post("/order/", {"a": a, "b": b})
    assert response.status_code == 200, response.content
    print(response.content.decode())


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # started in the background: SIGINT ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("seed")
    p.add_argument("n", type=int)
    p.add_argument("ids_file", type=Path)
    p = sub.add_parser("relay")
    p.add_argument("report", type=Path)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--ready")
    p.add_argument("--go")
    p.add_argument("--pause-after-send")
    p = sub.add_parser("seed-unseen")
    p.add_argument("ids_file", type=Path)
    p = sub.add_parser("view")
    p.add_argument("a", type=int)
    p.add_argument("b", type=int)
    args = parser.parse_args()

    import django

    django.setup()
    if args.command == "seed":
        seed(args.n, args.ids_file)
    elif args.command == "seed-unseen":
        seed_unseen(args.ids_file)
    elif args.command == "relay":
        relay(args)
    else:
        view(args.a, args.b)


if __name__ == "__main__":
    main()
