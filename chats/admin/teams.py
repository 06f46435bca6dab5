"""Teams in the admin: every team, its members (owners and members) and the chats shared with
it. Whoever a change leaves without access has their open pages of those chats closed, as on
the Team page (`chats.teams.services.access_ended`)."""

from __future__ import annotations

from django.contrib import admin

from chats.models import Team, TeamChatShare, TeamMembership
from chats.teams.services import access_ended


class MembershipInline(admin.TabularInline):
    model = TeamMembership
    extra = 1
    autocomplete_fields = ("user",)
    fields = ("user", "role", "from_provider", "created_at")
    readonly_fields = ("from_provider", "created_at")


class SharedChatInline(admin.TabularInline):
    model = TeamChatShare
    extra = 0
    fields = ("chat", "shared_by", "created_at")
    readonly_fields = ("chat", "shared_by", "created_at")

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # a chat is shared by its owner, from the chat's page


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("name", "created_at")
    search_fields = ("name", "memberships__user__username")
    inlines = (MembershipInline, SharedChatInline)

    def save_formset(self, request, form, formset, change) -> None:
        super().save_formset(request, form, formset, change)
        gone = formset.deleted_objects
        if formset.model is TeamMembership:
            access_ended(user_ids=[m.user_id for m in gone])
        elif formset.model is TeamChatShare and gone:
            access_ended(user_ids=_member_ids([form.instance.pk]))

    def delete_model(self, request, obj: Team) -> None:
        members = _member_ids([obj.pk])
        super().delete_model(request, obj)
        access_ended(user_ids=members)

    def delete_queryset(self, request, queryset) -> None:
        members = _member_ids(list(queryset.values_list("pk", flat=True)))
        super().delete_queryset(request, queryset)
        access_ended(user_ids=members)


def _member_ids(team_ids: list[int]) -> list[int]:
    memberships = TeamMembership.objects.filter(team_id__in=team_ids)
    return list(memberships.values_list("user_id", flat=True).distinct())
