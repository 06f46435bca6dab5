"""A user's display preferences: the colour theme (System, Light or Dark).

Kept on the server, per user, so that the choice follows the user to every browser and device
they sign in on; `templates/base.html` puts it on the page's <html> before any stylesheet is
applied. A signed-in session keeps a copy, taken at its first page and changed with the
choice, so that a page costs no query for it.
"""

from __future__ import annotations

from chats.models import Preference

Theme = Preference.Theme

SESSION_KEY = "theme"  # the session's copy of its user's theme


class PreferenceError(ValueError):
    """A preference value we refuse; the message is shown to the user."""


def theme_for_user(*, user) -> str:
    """Return the user's theme (a `Theme` value); System for anyone signed out or unset."""
    if not getattr(user, "is_authenticated", False):
        return Theme.SYSTEM
    theme = Preference.objects.filter(user=user).values_list("theme", flat=True).first()
    return theme or Theme.SYSTEM


def theme_shown(*, user, session) -> str:
    """The theme a page shows: the session's copy of the user's theme, read from their
    preferences at the session's first page."""
    if not getattr(user, "is_authenticated", False):
        return Theme.SYSTEM
    theme = session.get(SESSION_KEY)
    if theme not in Theme.values:
        theme = session[SESSION_KEY] = theme_for_user(user=user)
    return theme


def theme_set(*, user, theme: str, session=None) -> str:
    """Keep `theme` as the user's theme (and as `session`'s copy, when given); raise
    PreferenceError for anything not offered."""
    if theme not in Theme.values:
        raise PreferenceError(f"Choose one of: {', '.join(Theme.labels)}.")
    Preference.objects.update_or_create(user=user, defaults={"theme": theme})
    if session is not None:
        session[SESSION_KEY] = theme
    return theme
