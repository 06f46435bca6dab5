"""The review admin for what answers cite: sources and the tool calls (AUDIT traces) behind them.

References are shown inline on each turn's page (chats.admin.review), next to the answer they cite.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.contrib import admin
from django.db.models import Count
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from citations.models import AuditTrace, Source, SourcePage
from citations.review_admin import ReviewOnlyAdmin, headline_list, pretty_json, summary, turn_link


def safe_link(url: str) -> SafeString | str:
    """Link to http(s) URLs only: a stored `javascript:` URL must never become clickable."""
    if urlsplit(url).scheme.lower() not in {"http", "https"}:
        return url or "-"
    return format_html('<a href="{}" rel="noopener noreferrer" target="_blank">{}</a>', url, url)


@admin.register(Source)
class SourceAdmin(ReviewOnlyAdmin):
    list_display = (
        "label",
        "type",
        "name",
        "headline_summary",
        "url_link",
        "published_on",
        "cited_by",
    )
    list_filter = ("type", "name")
    search_fields = ("name", "headline", "url")
    show_full_result_count = False
    fields = (
        "label",
        "type",
        "name",
        "headline",
        "url_link",
        "published_on",
        "cited_by",
        "key",
        "first_seen_at",
        "data_pretty",
    )
    readonly_fields = ("url_link", "cited_by", "data_pretty")

    def get_queryset(self, request):
        cited_by = Count("references__turn", distinct=True)
        return super().get_queryset(request).annotate(cited_by_count=cited_by)

    @admin.display(description="headline")
    def headline_summary(self, source: Source) -> str:
        return summary(source.headline)

    @admin.display(description="URL")
    def url_link(self, source: Source) -> SafeString | str:
        return safe_link(source.url)

    @admin.display(description="cited by", ordering="cited_by_count")
    def cited_by(self, source: Source) -> SafeString | int:
        if not source.cited_by_count:
            return 0
        url = reverse("admin:chats_turn_changelist") + "?" + urlencode({"cites": source.pk})
        count = source.cited_by_count
        return format_html('<a href="{}">{} answer{}</a>', url, count, "" if count == 1 else "s")

    @admin.display(description="source as first seen")
    def data_pretty(self, source: Source) -> SafeString:
        return pretty_json(source.data)


@admin.register(AuditTrace)
class AuditTraceAdmin(ReviewOnlyAdmin):
    """The target of each reference's audit id: the full record of one tool call."""

    list_display = ("tool_id", "audit_type", "title_summary", "turn_id_link")
    search_fields = ("tool_id", "title")
    show_full_result_count = False
    fields = (
        "turn",
        "position",
        "audit_type",
        "tool_id",
        "title",
        "result_headlines",
        "data_pretty",
    )
    readonly_fields = ("result_headlines", "data_pretty")

    @admin.display(description="title or search query")
    def title_summary(self, trace: AuditTrace) -> str:
        return summary(trace.title)

    @admin.display(description="turn", ordering="turn")
    def turn_id_link(self, trace: AuditTrace) -> SafeString:
        return turn_link(trace.turn_id)

    @admin.display(description="result headlines")
    def result_headlines(self, trace: AuditTrace) -> SafeString | str:
        return headline_list(trace.result_headlines)

    @admin.display(description="trace as received")
    def data_pretty(self, trace: AuditTrace) -> SafeString:
        return pretty_json(trace.data)


@admin.register(SourcePage)
class SourcePageAdmin(ReviewOnlyAdmin):
    """Cited pages as the site last fetched them to check claims (citations.pages)."""

    list_display = ("url_summary", "final_link", "fetched_at", "status_code", "problem")
    list_filter = ("problem",)
    search_fields = ("url", "final_url")
    show_full_result_count = False
    fields = (
        "url",
        "final_link",
        "fetched_at",
        "status_code",
        "content_type",
        "problem",
        "text",
    )
    readonly_fields = ("final_link",)

    @admin.display(description="URL")
    def url_summary(self, page: SourcePage) -> str:
        return summary(page.url, 100)

    @admin.display(description="final URL")
    def final_link(self, page: SourcePage) -> SafeString | str:
        return safe_link(page.final_url)
