"""Pages: the Workflows list, running one (it streams into a new chat), saving a template."""

from __future__ import annotations

import json
from http import HTTPStatus

from channels.db import database_sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from chats.errors import TurnStartError
from chats.models import WorkflowTemplate
from chats.run.workflows import (
    MODELS,
    TIME_RANGES,
    WorkflowError,
    workflow_choices,
    workflow_request,
    workflow_start,
    workflow_turn_start,
)

MAX_TEMPLATE_CHARS = 20_000


def _page(request: HttpRequest, *, error: str = "", saving: dict | None = None) -> HttpResponse:
    context = {
        "choices": workflow_choices(user=request.user),
        "time_ranges": TIME_RANGES,
        "models": MODELS,
        "error": error,
        "saving": saving or {},
    }
    status = HTTPStatus.BAD_REQUEST if error else HTTPStatus.OK
    return render(request, "chats/workflows.html", context, status=status)


@require_GET
@login_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@login_required
async def workflow_run(request: HttpRequest) -> HttpResponse:
    """Start the chosen workflow in a new chat and open it; the run lives in this process."""
    user = await request.auser()

    def start():
        choices = {c.key: c for c in workflow_choices(user=user)}
        choice = choices.get(request.POST.get("workflow", ""))
        if choice is None:
            raise WorkflowError("That workflow is not available.")
        inputs = {name: request.POST.get(f"input_{name}", "") for name in choice.inputs}
        if choice.free_inputs and request.POST.get("inputs_json", "").strip():
            try:
                inputs = json.loads(request.POST["inputs_json"])
            except (ValueError, RecursionError):  # RecursionError: nested past what it parses
                raise WorkflowError("Inputs must be a JSON object of texts.") from None
            if not isinstance(inputs, dict):
                raise WorkflowError("Inputs must be a JSON object of texts.")
        workflow = workflow_request(
            choice,
            inputs=inputs,
            model=request.POST.get("model", ""),
            time_range=request.POST.get("time_range", ""),
        )
        return workflow_turn_start(owner=user, choice=choice, request=workflow), workflow

    try:
        turn, workflow = await database_sync_to_async(start)()
    except (WorkflowError, TurnStartError) as refused:
        return await database_sync_to_async(_page)(request, error=str(refused))
    await workflow_start(turn, workflow)
    return redirect("chat_detail", chat_id=turn.chat_id)


@require_POST
@login_required
def workflow_save(request: HttpRequest) -> HttpResponse:
    """Save an inline template: a JSON object whose strings may hold {{name}} placeholders."""
    name = request.POST.get("name", "").strip()[:100]
    text = request.POST.get("template", "")
    saving = {"name": name, "template": text}
    try:
        template = json.loads(text) if len(text) <= MAX_TEMPLATE_CHARS else None
    except (ValueError, RecursionError):
        template = None
    if not isinstance(template, dict):
        return _page(request, error="A template must be a JSON object.", saving=saving)
    if not name:
        return _page(request, error="Give the template a name.", saving=saving)
    WorkflowTemplate.objects.create(owner=request.user, name=name, template=template)
    return redirect("workflow_list")
