"""``runworker`` / ``runreaper``, the management commands: every test of them is here.

``spawn``, ``valkey_url``, ``valkey_jobs`` and ``echomq`` are shared (tests/support/fixtures.py);
``jobs`` is the Django layer's engine API (tests/django/conftest.py), for test_contract.py.
"""

from tests.django.conftest import jobs  # noqa: F401
