from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"
