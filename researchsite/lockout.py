"""Sign-in throttling around django-axes: the client's address it counts by, the per-username
cap, and the page a locked-out sign-in gets (site or admin).

The client's address is REMOTE_ADDR, which uvicorn sets: from a proxy's X-Forwarded-For only
when the connection comes from an address in FORWARDED_ALLOW_IPS (researchsite/serve.py),
otherwise the connection's own address. So no header a client writes picks its address.
"""

from __future__ import annotations

import ipaddress
import math
from http import HTTPStatus

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse

from researchsite.middleware import request_middleware

UNREADABLE_ADDRESS = "Your network address could not be read, so this request was refused."


def lockout_response(
    request: HttpRequest, original_response=None, credentials=None
) -> HttpResponse:
    """Render "too many failed sign-ins" in the look of the login page that was used (429)."""
    context = {"minutes": math.ceil(get_cool_off(request).total_seconds() / 60)}
    if request.path.startswith(reverse("admin:index")):
        context |= admin.site.each_context(request)
        template = "registration/admin_locked_out.html"
    else:
        template = "registration/locked_out.html"
    return render(request, template, context, status=HTTPStatus.TOO_MANY_REQUESTS)


class LoginFailureHandler(AxesDatabaseHandler):
    """Axes' database handler, with a second cap: failures for one username from every address
    together (LOGIN_FAILURE_LIMIT_PER_USERNAME), so guesses spread over many addresses stop too.

    Axes counts by its lockout parameters against one limit (LOGIN_FAILURE_LIMIT, per username
    and address); the username's own count has a higher limit of its own, since anyone may
    fail sign-ins for a username and so lock its owner out for the cool-off.
    """

    def get_failures(self, request, credentials=None) -> int:
        failures = super().get_failures(request, credentials)
        username = get_client_username(request, credentials)
        if not username or failures >= settings.AXES_FAILURE_LIMIT:
            return failures  # nothing to add, or locked already: no need to count further
        across_addresses = (
            AccessAttempt.objects.filter(
                username=username, attempt_time__gte=get_cool_off_threshold(request)
            ).aggregate(total=Sum("failures_since_start"))["total"]
            or 0
        )
        if across_addresses >= settings.LOGIN_FAILURE_LIMIT_PER_USERNAME:
            return max(failures, settings.AXES_FAILURE_LIMIT)  # as locked as a pair at its limit
        return failures


@request_middleware
def client_address_middleware(request: HttpRequest):
    """Answer 400 when the client's address is not an IP address.

    A trusted proxy passes on whatever X-Forwarded-For it was given; the address is stored with
    each failed sign-in, in a column PostgreSQL types as `inet` (a 500, without this check).
    """
    address = request.META.get("REMOTE_ADDR")
    if address:  # none on a Unix socket, which axes stores as NULL
        try:
            ipaddress.ip_address(address)
        except ValueError:
            return HttpResponseBadRequest(UNREADABLE_ADDRESS, content_type="text/plain")
    yield
