"""The page a locked-out sign-in gets (django-axes calls `lockout_response`), site or admin."""

from __future__ import annotations

import math
from http import HTTPStatus

from axes.helpers import get_cool_off
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse


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
