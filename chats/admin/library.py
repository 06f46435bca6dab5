"""The review admin's list of shares: who shared which chat, when, and whether it is revoked.

Reviewers read shares; only superusers delete one (its link then answers 404, like "Stop sharing").
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models.constants import LOOKUP_SEP

from chats.admin.review import ReviewOnlyAdmin
from chats.models import ChatShare

EXACT_LOOKUPS = ([], ["exact"])  # `?token=…` and `?token__exact=…`


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

    def lookup_allowed(self, lookup, value, request=None):
        """The token is filtered by its whole value only (a 400 otherwise). Django's admin takes
        any lookup on a model's own field from the querystring, and `?token__startswith=…` or
        `?token__gte=…` would make the row count an oracle that spells a token out. (The user
        list already refuses lookups on `password`: Django's UserAdmin does.)"""
        field, *lookups = lookup.split(LOOKUP_SEP)
        if field == "token" and lookups not in EXACT_LOOKUPS:
            return False
        return super().lookup_allowed(lookup, value, request)
