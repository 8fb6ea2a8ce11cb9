from tests.admin.conftest import jobs, superuser  # noqa: F401  (the admin's fixtures)
