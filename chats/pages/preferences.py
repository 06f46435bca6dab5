"""The theme choice in the header: a plain CSRF-checked form, which site.js also posts."""

from __future__ import annotations

from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from chats.form_replies import redirect_back, wants_json
from chats.preferences import PreferenceError, theme_set


@require_POST
@login_required
def theme_set_view(request: HttpRequest) -> HttpResponse:
    try:
        theme = theme_set(
            user=request.user, theme=request.POST.get("theme", ""), session=request.session
        )
    except PreferenceError as error:
        if wants_json(request):
            return JsonResponse({"error": str(error)}, status=HTTPStatus.BAD_REQUEST)
        return HttpResponse(str(error), status=HTTPStatus.BAD_REQUEST, content_type="text/plain")
    if wants_json(request):
        return JsonResponse({"theme": theme})
    return redirect_back(request, "chat_list")
