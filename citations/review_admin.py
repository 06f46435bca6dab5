"""Display helpers of the review admin, shared by every app's ModelAdmins.

Transcripts are evidence, so every model here is view-only (superusers alone may delete).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator

HEADLINES_SHOWN = 10


class ReviewOnlyAdmin(admin.ModelAdmin):
    """View-only: staff with the view permission read every page; only superusers delete."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.is_superuser


class ReviewOnlyInline(admin.TabularInline):
    extra = 0

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # delete the parent instead: its page lists everything that goes with it


class OneObjectFilter(admin.SimpleListFilter):
    """Filter on one object named in the URL; the sidebar names it instead of listing thousands."""

    model: type

    def lookups(self, request, model_admin):
        if self.value() is None:
            return []  # no sidebar entry: this filter is reached through links
        found = self.model._default_manager.filter(pk=self.object_id()).first()
        return [(self.value(), str(found) if found else f"#{self.value()} (not found)")]

    def object_id(self) -> int:
        value = self.value()
        if not (value.isdecimal() and 0 < int(value) < 2**63):
            raise IncorrectLookupParameters(f"{self.parameter_name} must be an id")
        return int(value)

    def queryset(self, request, queryset):
        return queryset if self.value() is None else self.of_object(queryset, self.object_id())

    def of_object(self, queryset, object_id: int):
        """The rows that go with the object named in the URL."""
        raise NotImplementedError


def json_text(value: Any, *, indent: int | None = None) -> str:
    """Return stored JSON as text; data nested too deep to print says so instead of failing."""
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False)
    except (RecursionError, ValueError):
        return "(nested too deeply to display)"


def pretty_json(value: Any) -> SafeString:
    return format_html("<pre>{}</pre>", json_text(value, indent=2))


def summary(text: str, chars: int = 80) -> str:
    return Truncator(text).chars(chars)


def admin_link(obj, text: str) -> SafeString:
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, text)


def turn_link(turn_id: int) -> SafeString:
    """Link to a turn from its id alone, so lists of its children need no join."""
    url = reverse("admin:chats_turn_change", args=[turn_id])
    return format_html('<a href="{}">Turn {}</a>', url, turn_id)


def headline_list(headlines: list[str]) -> SafeString | str:
    if not headlines:
        return "-"
    items = format_html_join("", "<li>{}</li>", ((h,) for h in headlines[:HEADLINES_SHOWN]))
    more = len(headlines) - HEADLINES_SHOWN
    tail = format_html("<li>… and {} more</li>", more) if more > 0 else ""
    return format_html("<ul>{}{}</ul>", items, tail)
