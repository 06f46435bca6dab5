"""The header's "Changes" link, with the number of changes its user has not seen."""

from __future__ import annotations

from django import template

from chats.watch.selectors import changes_unseen_count

register = template.Library()


@register.inclusion_tag("chats/_changes_link.html", takes_context=True)
def changes_link(context) -> dict:
    user = context["request"].user
    return {"unseen": changes_unseen_count(user=user) if user.is_authenticated else 0}
