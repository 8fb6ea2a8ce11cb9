"""Security tests reuse the Django-layer fixture that aims the app at the suite's server."""

from tests.django.conftest import echomq  # noqa: F401 - re-exported fixture
