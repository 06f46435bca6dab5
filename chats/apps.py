from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            admin_library,  # noqa: F401 (registers the shares' admin)
            sockets,  # noqa: F401 (connects the logout signal that closes sockets)
        )
