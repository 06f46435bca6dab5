"""`{% user_theme as theme %}`: the signed-in user's colour theme, for templates/base.html."""

from __future__ import annotations

from django import template

from chats.preferences import Theme, theme_for_user

register = template.Library()


@register.simple_tag(takes_context=True)
def user_theme(context) -> str:
    request = context.get("request")
    return theme_for_user(user=request.user) if request else Theme.SYSTEM


@register.simple_tag
def theme_choices() -> list[tuple[str, str]]:
    return list(Theme.choices)
