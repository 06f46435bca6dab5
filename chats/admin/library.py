"""The review admin's list of shares: who shared which chat, when, and whether it is revoked.

Reviewers read shares; only superusers delete one (its link then answers 404, like "Stop sharing").
"""

from __future__ import annotations

from django.contrib import admin

from chats.admin.review import ReviewOnlyAdmin
from chats.models import ChatShare


@admin.register(ChatShare)
class ChatShareAdmin(ReviewOnlyAdmin):
    list_display = ("chat", "created_by", "token_hint", "leaf_turn", "created_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    list_select_related = ("chat", "created_by", "leaf_turn")
    search_fields = ("chat__title", "created_by__username")
    date_hierarchy = "created_at"
    exclude = ("token",)  # the link is a credential: the list shows enough to tell shares apart
    readonly_fields = ("chat", "created_by", "token_hint", "leaf_turn", "created_at", "updated_at")

    @admin.display(description="link")
    def token_hint(self, share: ChatShare) -> str:
        return f"…/shared/{share.token[:6]}…"
