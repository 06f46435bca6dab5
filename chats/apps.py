from django.apps import AppConfig

from chats.live.fragments import register_fragments
from chats.pages.fragments import PAGE_FRAGMENTS
from chats.usage.prices import price_table


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: they import the models, which Django loads after apps.py.
        # Each connects a signal: the logout closes sockets (limits); a turn's deletion deletes
        # the events the log wrote meanwhile (event_log).
        import chats.live.event_log
        import chats.live.limits  # noqa: F401

        register_fragments(PAGE_FRAGMENTS)  # the live and run layers' HTML: page templates
        price_table()  # a MODEL_PRICES that cannot be read stops the start, saying why
