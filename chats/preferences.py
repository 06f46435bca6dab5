"""A user's display preferences: the colour theme (System, Light or Dark).

Kept on the server, per user, so that the choice follows the user to every browser and device;
`templates/base.html` puts it on the page's <html> before any stylesheet is applied.
"""

from __future__ import annotations

from chats.models import Preference

Theme = Preference.Theme


class PreferenceError(ValueError):
    """A preference value we refuse; the message is shown to the user."""


def theme_for_user(*, user) -> str:
    """Return the user's theme (a `Theme` value); System for anyone signed out or unset."""
    if not getattr(user, "is_authenticated", False):
        return Theme.SYSTEM
    theme = Preference.objects.filter(user=user).values_list("theme", flat=True).first()
    return theme or Theme.SYSTEM


def theme_set(*, user, theme: str) -> str:
    """Keep `theme` as the user's theme; raise PreferenceError for anything not offered."""
    if theme not in Theme.values:
        raise PreferenceError(f"Choose one of: {', '.join(Theme.labels)}.")
    Preference.objects.update_or_create(user=user, defaults={"theme": theme})
    return theme
