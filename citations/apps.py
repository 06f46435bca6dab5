from django.apps import AppConfig


class CitationsConfig(AppConfig):
    name = "citations"
    default_auto_field = "django.db.models.BigAutoField"
