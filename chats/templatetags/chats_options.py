"""`{% composer_options chat %}`: the composer's Options panel, filled from the chat's options."""

from __future__ import annotations

from typing import Any

from django import template

from chats.agent.options import LIST_OPTIONS, MODELS, QuestionOptions
from chats.agent.providers import BIGDATA
from chats.models import Chat, OutputSchema

register = template.Library()


@register.inclusion_tag("chats/_composer_options.html")
def composer_options(chat: Chat) -> dict[str, Any]:
    options = QuestionOptions.from_stored(chat.options)
    return {
        "shown": chat.provider == BIGDATA,  # the options are the Research Agent's
        "options": options,
        "models": MODELS,
        "lists": {name: ", ".join(getattr(options, name)) for name in LIST_OPTIONS},
        "schemas": OutputSchema.objects.filter(owner_id=chat.owner_id),
    }
