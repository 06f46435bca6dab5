"""The review admin: past answers as their users saw them, each reference traced to its evidence.

Transcripts are evidence, so every model here is view-only (superusers alone may delete).
Lists that grow with traffic (turns, events) never load a full answer per row, never count the
whole table twice, and the event log is a paginated changelist rather than an inline.
"""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef
from django.forms.models import BaseInlineFormSet
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import content_disposition_header, urlencode
from django.utils.safestring import SafeString, mark_safe

from chats.admin.usage import usage_review_view
from chats.agent.events import KNOWN_TYPES
from chats.agent.providers import BIGDATA, PROVIDERS
from chats.answer.export import export_turns_markdown
from chats.live.fragments import fragments
from chats.models import Chat, Turn, TurnEvent
from citations.claims import CHECK_STATES, ClaimCheck
from citations.models import AuditTrace, Reference, Source
from citations.pages import page_problem_line
from citations.references import PageRead
from citations.render_html import render_html
from citations.review_admin import (
    OneObjectFilter,
    ReviewOnlyAdmin,
    ReviewOnlyInline,
    admin_link,
    headline_list,
    json_text,
    pretty_json,
    summary,
    turn_link,
)
from citations.selectors import cited_answer_for_turn

admin.site.site_header = "ResearchSite review"
admin.site.site_title = "ResearchSite review"
admin.site.index_title = "Past answers and their evidence"

# The answer bodies: long, and shown only on a turn's own page.
ANSWER_BODY_FIELDS = (
    "answer_text",
    "answer_html",
    "structured_output",
    "consumption",
    "charts",
)


# Vega-Lite and the page's drawing script, for the charts on a turn's page.
CHART_SCRIPTS = [
    "chats/vendor/vega.min.js",
    "chats/vendor/vega-lite.min.js",
    "chats/vendor/vega-embed.min.js",
    "chats/vendor/vega-interpreter.min.js",
    "chats/charts.js",
]


def format_duration(duration: timedelta | None) -> str:
    return f"{duration.total_seconds():.1f} s" if duration is not None else "-"


class TurnInline(ReviewOnlyInline):
    model = Turn
    fk_name = "chat"
    fields = ("question_summary", "status", "research_effort", "created_at")
    readonly_fields = fields
    ordering = ("created_at", "id")
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).defer(*ANSWER_BODY_FIELDS)

    @admin.display(description="question")
    def question_summary(self, turn: Turn) -> str:
        return summary(turn.question)


class AgentFilter(admin.SimpleListFilter):
    """The agents by name, from the registry rather than a DISTINCT over every row."""

    title = "agent"
    parameter_name = "agent"
    field = "provider"

    def lookups(self, request, model_admin):
        return [(BIGDATA, "Bigdata Research Agent")] + [
            (p.name, p.label) for p in PROVIDERS.values()
        ]

    def queryset(self, request, queryset):
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class ChatAgentFilter(AgentFilter):
    pass


class TurnAgentFilter(AgentFilter):
    field = "chat__provider"


@admin.register(Chat)
class ChatAdmin(ReviewOnlyAdmin):
    list_display = ("__str__", "owner", "provider", "turn_count", "updated_at")
    list_select_related = ("owner",)
    list_filter = (
        ("owner", admin.RelatedOnlyFieldListFilter),
        ChatAgentFilter,
        "updated_at",
        "created_at",
    )
    search_fields = ("title", "turns__question")
    fields = (
        "title",
        "owner",
        "provider",
        "turn_count",
        "created_at",
        "updated_at",
        "upstream_chat_id",
        "active_turn",
    )
    readonly_fields = ("turn_count",)
    inlines = (TurnInline,)

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(turn_count=Count("turns"))

    @admin.display(description="turns", ordering="turn_count")
    def turn_count(self, chat: Chat) -> int:
        return chat.turn_count


class ToolErrorFilter(admin.SimpleListFilter):
    title = "tool errors"
    parameter_name = "has_tool_errors"

    def lookups(self, request, model_admin):
        return [("yes", "With tool errors"), ("no", "Without")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(tool_error_count__gt=0)
        if self.value() == "no":
            return queryset.filter(tool_error_count=0)
        return queryset


class CheckStateFilter(admin.SimpleListFilter):
    """Answers with a cited claim in a given state of the figure check ("figure not found")."""

    title = "figure check"
    parameter_name = "check"

    def lookups(self, request, model_admin):
        return [(state, f"has a claim: {state}") for state in CHECK_STATES]

    def queryset(self, request, queryset):
        if self.value() not in CHECK_STATES:
            return queryset
        having = Reference.objects.filter(turn=OuterRef("pk"), claim_check__status=self.value())
        return queryset.filter(Exists(having))


class CitesSourceFilter(OneObjectFilter):
    """The Source admin's "cited by" links land here (`?cites=<source id>`)."""

    title = "cites source"
    parameter_name = "cites"
    model = Source

    def of_object(self, queryset, object_id: int):
        # Exists rather than a join: a turn citing the source five times is listed once.
        cites = Reference.objects.filter(turn=OuterRef("pk"), source_id=object_id)
        return queryset.filter(Exists(cites))


class ReferenceFormSet(BaseInlineFormSet):
    def get_queryset(self):
        # Cited spans slice the parent turn's answer: hand every reference the turn already
        # loaded instead of fetching (or joining) the whole answer once per reference.
        references = super().get_queryset()
        for reference in references:
            reference.turn = self.instance
        return references


class ReferenceInline(ReviewOnlyInline):
    model = Reference
    formset = ReferenceFormSet
    ordering = ("position",)  # the model's ("turn", "position") would join the turn again
    fields = (
        "footnote",
        "cited_span",
        "source_link",
        "tool_name",
        "audit_link",
        "is_valid",
        "problem",
        "claim_state",
        "page_read",
    )
    readonly_fields = fields
    verbose_name_plural = "references (what supports each span of the answer)"

    @admin.display(description="figure check")
    def claim_state(self, reference: Reference) -> str:
        """The state of the claim this reference supports, and why ("not read: HTTP 404")."""
        if not reference.claim_check:
            return "-"
        check = ClaimCheck.from_dict(reference.claim_check)
        if check.status in ("figure not found", "not read"):
            return check.line
        return f"{check.status}: {check.line}" if check.message else check.status

    @admin.display(description="cited page")
    def page_read(self, reference: Reference) -> str:
        """What the site made of the cited page, when the citation carried no passage."""
        read = PageRead.from_data(reference.page)
        if read is None:
            return "-"
        if read.pending:
            return "being read"
        if read.problem:
            return page_problem_line(read.problem)
        fetched = read.fetched_on.isoformat() if read.fetched_on else "?"
        return f"fetched {fetched}: {read.final_url or read.url}"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("source")

    @admin.display(description="cited span")
    def cited_span(self, reference: Reference) -> str:
        if reference.start is None or reference.end is None:
            return "-"
        return summary(reference.turn.answer_text[reference.start : reference.end], 120)

    @admin.display(description="source")
    def source_link(self, reference: Reference) -> SafeString | str:
        if reference.source is None:
            return "tool-level (no document)"  # docs/PROTOCOL.md, "GROUNDING"
        return admin_link(reference.source, reference.source.label)

    @admin.display(description="audit id")
    def audit_link(self, reference: Reference) -> SafeString | str:
        if reference.audit_trace_id is None:
            return f"{reference.audit_id} (no matching trace)" if reference.audit_id else "-"
        url = reverse("admin:citations_audittrace_change", args=[reference.audit_trace_id])
        return format_html('<a href="{}">{}</a>', url, reference.audit_id)


class AuditTraceInline(ReviewOnlyInline):
    model = AuditTrace
    ordering = ("position",)
    fields = ("position", "audit_type", "tool_id", "title", "result_headlines")
    readonly_fields = fields
    show_change_link = True
    verbose_name_plural = "audit traces (the tool calls behind the references)"

    @admin.display(description="result headlines")
    def result_headlines(self, trace: AuditTrace) -> SafeString | str:
        return headline_list(trace.result_headlines)


class TurnChangeList(ChangeList):
    def get_queryset(self, request, exclude_parameters=None):
        # A page of 100 turns shows none of their answers: don't load 100 of them.
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer(*ANSWER_BODY_FIELDS)


@admin.register(Turn)
class TurnAdmin(ReviewOnlyAdmin):
    list_display = (
        "question_summary",
        "chat",
        "owner",
        "provider",
        "status",
        "research_effort",
        "tool_error_count",
        "created_at",
        "duration_display",
    )
    list_select_related = ("chat__owner",)
    list_filter = (
        "status",
        TurnAgentFilter,
        "created_at",
        "research_effort",
        ToolErrorFilter,
        CheckStateFilter,
        CitesSourceFilter,
    )
    search_fields = ("question", "answer_text")
    ordering = ("-created_at", "-id")
    show_full_result_count = False  # a second COUNT(*) over every turn, for one sentence
    actions = ("export_markdown",)
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "chat",
                    "owner",
                    "provider",
                    "parent",
                    "question",
                    "research_effort",
                    "status",
                )
            },
        ),
        (
            "Answer",
            {"fields": ("cited_answer", "charts_display", "structured_output_table")},
        ),
        (
            "Structured output as received",
            {"fields": ("structured_output",), "classes": ("collapse",)},
        ),
        (
            "Answer as plain text (the offsets of the references count in it)",
            {"fields": ("answer_text",), "classes": ("collapse",)},
        ),
        (
            "Errors",
            {"fields": ("error_kind", "error", "tool_error_count", "malformed_lines", "notices")},
        ),
        (
            "Checkpoints",
            {"fields": ("upstream_chat_id", "from_checkpoint_id", "checkpoint_id", "is_restart")},
        ),
        (
            "Timing",
            {"fields": ("created_at", "finished_at", "duration_display", "lease_expires_at")},
        ),
        ("Consumption", {"fields": ("consumption_table",)}),
        ("Raw event log", {"fields": ("event_log",)}),
    )
    readonly_fields = (
        "owner",
        "provider",
        "cited_answer",
        "charts_display",
        "structured_output_table",
        "duration_display",
        "consumption_table",
        "event_log",
    )
    inlines = (ReferenceInline, AuditTraceInline)

    class Media:
        # Evidence cards on the cited answer, as on the chat page.
        css = {"all": ["citations/evidence.css"]}
        js = ["citations/evidence.js", *CHART_SCRIPTS]

    def get_urls(self):
        usage = self.admin_site.admin_view(self.usage_view)
        return [path("usage/", usage, name="chats_turn_usage"), *super().get_urls()]

    def usage_view(self, request):
        """Tokens and cost per user, month, agent and model, filtered, or as CSV."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {**self.admin_site.each_context(request), "opts": self.model._meta}
        return usage_review_view(request, context)

    @admin.display(description="charts")
    def charts_display(self, turn: Turn) -> SafeString | str:
        if not turn.charts:
            return self.get_empty_value_display()
        html = fragments().charts(turn.charts)  # escaped by the template; specs sanitised
        return mark_safe(html)

    @admin.display(description="structured output")
    def structured_output_table(self, turn: Turn) -> SafeString | str:
        if turn.structured_output is None:
            return self.get_empty_value_display()
        html = render_to_string("chats/_structured_output.html", {"turn": turn})
        return mark_safe(html)

    def get_changelist(self, request, **kwargs):
        return TurnChangeList

    @admin.display(description="question")
    def question_summary(self, turn: Turn) -> str:
        return summary(turn.question)

    @admin.display(description="owner", ordering="chat__owner")
    def owner(self, turn: Turn):
        return turn.chat.owner

    @admin.display(description="agent", ordering="chat__provider")
    def provider(self, turn: Turn) -> str:
        return turn.chat.provider

    @admin.display(description="duration")
    def duration_display(self, turn: Turn) -> str:
        return format_duration(turn.duration)

    @admin.display(description="cited answer")
    def cited_answer(self, turn: Turn) -> SafeString | str:
        if turn.answer_html:
            # Sanitised by the citations renderer when the turn finished: as the user saw it.
            return mark_safe(f'<div class="cited-answer">{turn.answer_html}</div>')
        if not turn.answer_text:
            return self.get_empty_value_display()
        # The same doc_id as when the turn finished, so its footnote ids match the chat page's.
        html = render_html(cited_answer_for_turn(turn), doc_id=f"t{turn.pk}")
        return mark_safe(f'<div class="cited-answer">{html}</div>')

    @admin.display(description="tokens per model tier")
    def consumption_table(self, turn: Turn) -> SafeString | str:
        tiers = [c for c in turn.consumption if isinstance(c, dict)] if turn.consumption else []
        if not tiers:
            return self.get_empty_value_display()
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    t.get("type", "?"),
                    t.get("input_tokens"),
                    t.get("output_tokens"),
                    t.get("cached_tokens"),
                )
                for t in tiers
            ),
        )
        return format_html(
            "<table><thead><tr><th>tier</th><th>input</th><th>output</th><th>cached</th></tr>"
            "</thead><tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="events")
    def event_log(self, turn: Turn) -> SafeString:
        # A paginated changelist, not an inline: a turn can have thousands of events.
        count = turn.events.count()
        url = reverse("admin:chats_turnevent_changelist") + "?" + urlencode({"turn": turn.pk})
        return format_html('<a href="{}">{} events, in arrival order</a>', url, count)

    @admin.action(description="Export selected answers as one Markdown file", permissions=["view"])
    def export_markdown(self, request, queryset):
        turns = queryset.defer(None).order_by("created_at", "id")  # the list deferred the answers
        filename = f"answers-{timezone.now():%Y%m%d-%H%M%S}.md"
        return HttpResponse(
            export_turns_markdown(turns),
            content_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": content_disposition_header(True, filename)},
        )


class ForTurnFilter(OneObjectFilter):
    """The turn page's "events" link lands here (`?turn=<turn id>`)."""

    title = "turn"
    parameter_name = "turn"
    model = Turn

    def of_object(self, queryset, object_id: int):
        return queryset.filter(turn_id=object_id)


class EventTypeFilter(admin.SimpleListFilter):
    """The known message types, without a DISTINCT over millions of events."""

    title = "type"
    parameter_name = "type"

    def lookups(self, request, model_admin):
        known = sorted(KNOWN_TYPES)
        value = self.value()
        return [(t, t) for t in known + ([value] if value and value not in known else [])]

    def queryset(self, request, queryset):
        return queryset.filter(type=self.value()) if self.value() else queryset


@admin.register(TurnEvent)
class TurnEventAdmin(ReviewOnlyAdmin):
    list_display = ("seq", "type", "turn_id_link", "received_at", "preview")
    list_display_links = ("seq",)
    list_filter = (ForTurnFilter, EventTypeFilter)
    list_per_page = 100
    show_full_result_count = False
    ordering = ("turn_id", "seq")  # the (turn, seq) unique index; "turn" would join turns
    fields = ("turn", "seq", "type", "received_at", "data_pretty")
    readonly_fields = ("data_pretty",)

    @admin.display(description="turn", ordering="turn_id")
    def turn_id_link(self, event: TurnEvent) -> SafeString:
        return turn_link(event.turn_id)

    @admin.display(description="data")
    def preview(self, event: TurnEvent) -> str:
        return summary(json_text(event.data), 120)

    @admin.display(description="data")
    def data_pretty(self, event: TurnEvent) -> SafeString:
        return pretty_json(event.data)
