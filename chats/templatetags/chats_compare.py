"""Template helpers of the compare page and of the Compare link on a share."""

from __future__ import annotations

from django import template

from chats.answer.compare import VersionPair
from chats.models import ChatShare, Turn

register = template.Library()


@register.filter
def version_number(pair: VersionPair, turn: Turn) -> int:
    return pair.number(turn)


@register.simple_tag
def share_versions(share: ChatShare, turn: Turn) -> int:
    """How many finished versions of `turn` the share held when it was made."""
    return (
        Turn.objects.filter(
            chat_id=turn.chat_id, parent_id=turn.parent_id, created_at__lte=share.updated_at
        )
        .exclude(status=Turn.Status.STREAMING)
        .count()
    )
