from tests.django.conftest import jobs  # noqa: F401  (the Django layer's engine API; echomq: tests/support)
