"""The theme toggle in the header: a plain CSRF-checked form, which site.js also posts."""

from __future__ import annotations

from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from chats.preferences import PreferenceError, theme_set


@require_POST
@login_required
def theme_set_view(request: HttpRequest) -> HttpResponse:
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        theme = theme_set(user=request.user, theme=request.POST.get("theme", ""))
    except PreferenceError as error:
        if wants_json:
            return JsonResponse({"error": str(error)}, status=HTTPStatus.BAD_REQUEST)
        return HttpResponse(str(error), status=HTTPStatus.BAD_REQUEST, content_type="text/plain")
    if wants_json:
        return JsonResponse({"theme": theme})
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return redirect(back if safe else "chat_list")
