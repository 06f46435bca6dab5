from django.core.management.base import BaseCommand

from chats.library.search import chat_search_index_rebuild


class Command(BaseCommand):
    help = "Rebuild the full-text search index of every chat."

    def handle(self, *args, **options) -> None:
        count = chat_search_index_rebuild()
        self.stdout.write(f"Indexed {count} chat{'s' if count != 1 else ''}.")
