"""Pages: the user's saved structured output schemas (chosen in the composer's Options)."""

from __future__ import annotations

import json
from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from chats.agent.options import OptionsError, check_output_schema
from chats.models import OutputSchema

MAX_SCHEMA_CHARS = 20_000


@require_http_methods(["GET", "POST"])
@login_required
def output_schemas(request: HttpRequest) -> HttpResponse:
    error, name, text = "", "", ""
    if request.method == "POST":
        name = request.POST.get("name", "").strip()[:100]
        text = request.POST.get("schema", "")
        try:
            schema = output_schema_from_text(text)
            if not name:
                raise OptionsError("Give the schema a name.")
        except OptionsError as refused:
            error = str(refused)
        else:
            OutputSchema.objects.create(owner=request.user, name=name, schema=schema)
            return redirect("output_schemas")
    context = {
        "schemas": OutputSchema.objects.filter(owner=request.user),
        "error": error,
        "name": name,
        "text": text,
    }
    status = HTTPStatus.BAD_REQUEST if error else HTTPStatus.OK
    return render(request, "chats/output_schemas.html", context, status=status)


@require_POST
@login_required
def output_schema_delete(request: HttpRequest, schema_id: int) -> HttpResponse:
    get_object_or_404(OutputSchema, pk=schema_id, owner=request.user).delete()
    return redirect("output_schemas")


def output_schema_from_text(text: str):
    """Return the schema written in `text`, or raise OptionsError saying what is wrong."""
    if len(text) > MAX_SCHEMA_CHARS:
        raise OptionsError(f"Schemas are limited to {MAX_SCHEMA_CHARS} characters.")
    try:
        schema = json.loads(text)
    except (ValueError, RecursionError):
        raise OptionsError("The schema must be JSON.") from None
    check_output_schema(schema)
    return schema
