"""The review admin's watches and their runs, filtered by user and state."""

from __future__ import annotations

from django.contrib import admin

from chats.models import Watch, WatchRun
from citations.review_admin import ReviewOnlyAdmin, ReviewOnlyInline


class WatchRunInline(ReviewOnlyInline):
    model = WatchRun
    fields = ("started_at", "state", "summary", "figures", "turn", "previous_turn", "error")
    readonly_fields = fields
    ordering = ("-started_at",)
    show_change_link = True

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("turn", "previous_turn")


@admin.register(Watch)
class WatchAdmin(ReviewOnlyAdmin):
    list_display = (
        "id", "owner", "question", "every", "time_of_day", "state", "next_run_at",
        "consecutive_failures", "last_run_at",
    )  # fmt: skip
    list_filter = ("state", "every", ("owner", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("owner", "turn")
    search_fields = ("turn__question", "owner__username")
    raw_id_fields = ("chat", "turn")
    inlines = [WatchRunInline]

    @admin.display(description="question")
    def question(self, watch: Watch) -> str:
        return watch.turn.question[:80]


@admin.register(WatchRun)
class WatchRunAdmin(ReviewOnlyAdmin):
    list_display = ("id", "watch", "owner", "state", "summary", "started_at", "finished_at")
    list_filter = ("state", ("watch__owner", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("watch__owner", "watch__turn")
    search_fields = ("summary", "figures", "watch__owner__username")
    raw_id_fields = ("watch", "turn", "previous_turn")
    date_hierarchy = "started_at"

    @admin.display(description="user")
    def owner(self, run: WatchRun) -> str:
        return run.watch.owner.get_username()
