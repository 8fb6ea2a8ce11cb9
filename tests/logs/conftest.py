from tests.django.conftest import echomq, jobs  # noqa: F401  (the Django layer's fixtures)
