"""API tokens and webhooks in the admin: staff see every user's, and revoke any token. A token's
value is never stored, so never shown; a webhook endpoint's signing secret is not shown either."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from chats.api.models import ApiToken
from chats.webhooks.models import WebhookDelivery, WebhookEndpoint
from citations.review_admin import ReviewOnlyAdmin, ReviewOnlyInline


class RevokedFilter(admin.SimpleListFilter):
    title = "revoked"
    parameter_name = "revoked"

    def lookups(self, request, model_admin):
        return [("no", "not revoked"), ("yes", "revoked")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(revoked_at__isnull=self.value() == "no")
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(ReviewOnlyAdmin):
    list_display = (
        "id", "owner", "name", "hint", "scope_list", "created_at", "expires_at", "last_used_at",
        "revoked_at",
    )  # fmt: skip
    list_filter = (RevokedFilter, ("owner", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("owner",)
    search_fields = ("name", "owner__username")
    fields = (
        "owner", "name", "hint", "scope_list", "created_at", "expires_at", "last_used_at",
        "revoked_at",
    )  # fmt: skip
    readonly_fields = fields
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, token: ApiToken) -> str:
        return ", ".join(token.scopes)

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("chats.change_apitoken")  # what revoking needs

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request, queryset) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


class WebhookDeliveryInline(ReviewOnlyInline):
    model = WebhookDelivery
    fields = ("created_at", "event", "status", "attempts", "last_status_code", "last_error")
    readonly_fields = fields
    ordering = ("-created_at",)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReviewOnlyAdmin):
    list_display = ("id", "owner", "url", "events", "created_at")
    list_filter = (("owner", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("owner",)
    search_fields = ("url", "owner__username")
    fields = ("owner", "url", "events", "created_at")
    readonly_fields = fields
    inlines = [WebhookDeliveryInline]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReviewOnlyAdmin):
    list_display = (
        "id", "endpoint", "event", "status", "attempts", "last_status_code", "created_at",
        "delivered_at",
    )  # fmt: skip
    list_filter = ("status", "event")
    list_select_related = ("endpoint",)
    search_fields = ("message_id", "endpoint__url", "endpoint__owner__username")
    exclude = ("body",)
    readonly_fields = (
        "endpoint", "event", "message_id", "status", "attempts", "last_status_code",
        "last_error", "created_at", "last_attempt_at", "next_attempt_at", "delivered_at",
    )  # fmt: skip
