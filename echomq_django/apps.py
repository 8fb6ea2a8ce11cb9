from django.apps import AppConfig


class EchoMQConfig(AppConfig):
    name = "echomq_django"
    label = "echomq"
    verbose_name = "EchoMQ"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from . import checks, outbox_checks, schedule_checks, server_checks  # noqa: F401  (register the system checks)
