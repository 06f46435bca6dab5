"""Export a chat's active branch as Markdown: `export_chat CHAT_ID`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from chats.answer.export import export_turns_markdown
from chats.models import Chat
from chats.selectors import chat_branch


class Command(BaseCommand):
    help = "Print the questions and cited answers of a chat's active branch as Markdown."

    def add_arguments(self, parser):
        parser.add_argument("chat_id", type=int)

    def handle(self, *args, chat_id: int, **options):
        chat = Chat.objects.filter(pk=chat_id).first()
        if chat is None:
            raise CommandError(f"Chat {chat_id} does not exist.")
        self.stdout.write(
            export_turns_markdown([item.turn for item in chat_branch(chat=chat)]), ending=""
        )
