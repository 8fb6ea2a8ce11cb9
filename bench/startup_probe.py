"""``python -m bench.startup_probe ARGS``: ``python -m django ARGS`` with start-up timestamps.

Used by :mod:`bench.startup` for the "first job done after spawn" breakdown of
EchoMQ's runworker. Writes ``<stage> <time.time()>`` lines to the file named by
``BENCH_STARTUP``: ``interpreter`` (this module's first line: Python and site are
up), ``django_import`` (Django's package and management modules imported),
``django_setup`` (settings, apps and EchoMQ's app ready), ``checks_start`` /
``checks_end`` (the command's system checks), ``claim_call`` / ``claim_return``
(the worker's first claim, built and sent, then its reply read). The worker itself
is not changed: the claim is observed by wrapping ``Jobs.claim_call`` and
``Claim.from_reply`` before the command runs.
"""

import time

T0 = time.time()

import functools  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

_out = open(os.environ["BENCH_STARTUP"], "a")  # noqa: SIM115 - the process's lifetime


def mark(stage: str, t: float | None = None) -> None:
    _out.write(f"{stage} {time.time() if t is None else t!r}\n")
    _out.flush()


def once(stage_call: str | None, stage_return: str | None, fn):
    """Wrap ``fn`` to mark its first call and first return (None: not that one)."""
    seen = []

    @functools.wraps(fn)
    def inner(*args, **kwargs):
        first = not seen
        if first:
            seen.append(True)
            if stage_call:
                mark(stage_call)
        try:
            return fn(*args, **kwargs)
        finally:
            if first and stage_return:
                mark(stage_return)

    return inner


def main() -> None:
    mark("interpreter", T0)
    args = sys.argv[1:]
    if "--settings" in args:  # what execute_from_command_line would do, before setup()
        os.environ["DJANGO_SETTINGS_MODULE"] = args[args.index("--settings") + 1]
    import django
    from django.core.management import execute_from_command_line
    from django.core.management.base import BaseCommand

    mark("django_import")
    django.setup()
    mark("django_setup")
    from echomq_django.engine.jobs import Claim, Jobs

    Jobs.claim_call = staticmethod(once("claim_call", None, Jobs.claim_call))
    Claim.from_reply = classmethod(once(None, "claim_return", Claim.from_reply.__func__))
    BaseCommand.check = once("checks_start", "checks_end", BaseCommand.check)
    execute_from_command_line(["django", *args])


if __name__ == "__main__":
    main()
