from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "project.demo"
    label = "demo"
    verbose_name = "EchoMQ demo"
    default_auto_field = "django.db.models.BigAutoField"
