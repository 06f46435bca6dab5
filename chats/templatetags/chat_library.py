"""Template tags of the chat library: the sidebar's groups and a chat's share link.

Tags rather than view context so that every page with the sidebar gets it without each view
computing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import template
from django.urls import reverse

from chats.library.selectors import ChatGroup, chat_share_active, chat_sidebar_for_user
from chats.models import Chat, ChatShare

register = template.Library()


@register.simple_tag(takes_context=True)
def chat_sidebar_groups(context) -> list[ChatGroup]:
    return chat_sidebar_for_user(user=context["request"].user)


@dataclass(frozen=True)
class ShareLink:
    share: ChatShare
    url: str
    is_current: bool  # the link shows the newest finished answer of the visible branch


@register.simple_tag(takes_context=True)
def chat_share_link(context, chat: Chat, branch) -> ShareLink | None:
    share = chat_share_active(chat=chat)
    if share is None:
        return None
    finished = [item.turn.pk for item in branch or [] if item.turn.is_finished]
    url = context["request"].build_absolute_uri(reverse("chat_shared", args=[share.token]))
    return ShareLink(share, url, bool(finished) and finished[-1] == share.leaf_turn_id)
