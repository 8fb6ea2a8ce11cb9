"""Tasks Django accepts whose module path names no Task of their function: no worker
could ever find them by the path their rows hold (see test_task_paths.py); and one it
finds, in this module outside the installed apps and TASK_MODULES, loaded once."""

from __future__ import annotations

from echomq_django.compat import task


def _deliver(x):
    return x


deliver = task(_deliver)  # the module's ``_deliver`` is the plain function, not this Task
anonymous = task(lambda x: x)  # path "...<lambda>"


@task
def replaced(x):
    return x


shadowed = replaced
replaced = task(lambda x: -x)  # the path of ``shadowed`` now names another Task


@task
def found(x):
    return x
