"""Template helpers of the compare page."""

from __future__ import annotations

from django import template

from chats.answer.compare import VersionPair
from chats.models import Turn

register = template.Library()


@register.filter
def version_number(pair: VersionPair, turn: Turn) -> int:
    return pair.number(turn)
