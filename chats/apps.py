from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chats.live import limits  # noqa: F401 (connects the logout signal that closes sockets)
        from chats.live.fragments import register_fragments
        from chats.pages.fragments import PAGE_FRAGMENTS
        from chats.usage.prices import price_table

        register_fragments(PAGE_FRAGMENTS)  # the live and run layers' HTML: page templates
        price_table()  # a MODEL_PRICES that cannot be read stops the start, saying why
