"""`{% user_theme as theme %}`: the signed-in user's colour theme, for templates/base.html
(its session's copy: no query)."""

from __future__ import annotations

from django import template

from chats.preferences import Theme, theme_shown

register = template.Library()


@register.simple_tag(takes_context=True)
def user_theme(context) -> str:
    request = context.get("request")
    if request is None:
        return Theme.SYSTEM
    return theme_shown(user=request.user, session=request.session)


@register.simple_tag
def theme_choices() -> list[tuple[str, str]]:
    return list(Theme.choices)
