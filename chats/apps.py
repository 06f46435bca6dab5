from django.apps import AppConfig

from chats.live.fragments import register_fragments
from chats.pages.fragments import PAGE_FRAGMENTS
from chats.usage.prices import price_table


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: it imports the models, which Django loads after apps.py.
        import chats.live.limits  # noqa: F401 (connects the logout signal that closes sockets)

        register_fragments(PAGE_FRAGMENTS)  # the live and run layers' HTML: page templates
        price_table()  # a MODEL_PRICES that cannot be read stops the start, saying why
