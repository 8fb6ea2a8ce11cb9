"""An installed app whose tasks live outside a ``tasks.py`` (the worker imports their modules).

Used by the contract suite (``tests/django/test_contract.py``): the runworker
subprocesses run with ``tests.django.settings``, which installs this app.
"""
