"""Pages: the Workflows list, running one (it streams into a new chat), saving a template.

What a user can run: the template ids of WORKFLOW_TEMPLATE_IDS, their saved templates, and the
templates the agent has built in (WORKFLOW_BUILTIN_TEMPLATES: `researchsite/settings.py` fills it
with the demo agent's when it mounts the demo agent). A run is asked like a question
(`chats.run.asks.ask_start`): the same session check, batch, limits and refusals; its ask names a
new chat, which the start creates with the run's turn (`chats.services.TurnAsk`). The
Workflows wire is the edge's (`chats.agent.providers.workflows`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from chats.agent.providers import BIGDATA
from chats.agent.providers.workflows import MODELS, TIME_RANGES
from chats.agent.request import Workflow
from chats.errors import TurnStartError
from chats.models import Chat, WorkflowTemplate
from chats.run.asks import SessionCheck, ask_start
from chats.run.storable import storable_text
from chats.services import TurnAsk

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
MAX_INPUT_CHARS = 500
MAX_TEMPLATE_CHARS = 20_000


# --- What a user can run ------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowChoice:
    key: str  # "id:<id>", "saved:<pk>" or "builtin:<id>": what the run form posts
    name: str
    template: str | dict[str, Any]  # sent as `template`
    inputs: tuple[str, ...]  # named placeholders; () for an id whose inputs we cannot see
    free_inputs: bool = False  # ask for inputs as JSON (a configured id)
    kind: str = ""


def placeholders(template: Any) -> tuple[str, ...]:
    """Return the {{name}} placeholders in every string of an inline template, in order."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.extend(PLACEHOLDER.findall(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(template)
    return tuple(dict.fromkeys(found))


def workflow_choices(*, user) -> list[WorkflowChoice]:
    """Configured template ids, the user's saved templates, and the agent's built-ins."""
    choices = [
        WorkflowChoice(f"id:{tid}", tid, tid, (), free_inputs=True, kind="Configured")
        for tid in settings.WORKFLOW_TEMPLATE_IDS
    ]
    for saved in WorkflowTemplate.objects.filter(owner=user):
        choices.append(
            WorkflowChoice(
                f"saved:{saved.pk}",
                saved.name,
                saved.template,
                placeholders(saved.template),
                kind="Saved",
            )
        )
    for tid, builtin in settings.WORKFLOW_BUILTIN_TEMPLATES.items():
        inputs = tuple(builtin["inputs"])
        choices.append(
            WorkflowChoice(f"builtin:{tid}", builtin["name"], tid, inputs, kind="Built in")
        )
    return choices


# --- The run form ---------------------------------------------------------------------------


class WorkflowError(ValueError):
    """A run form we refuse; the message is shown on the page."""


def workflow_of_form(
    choice: WorkflowChoice, *, inputs: Mapping[str, Any], model: str, time_range: str
) -> Workflow:
    """Return the run a form asks for, or raise WorkflowError saying what is wrong."""
    if model not in ("", *MODELS):
        raise WorkflowError("Model must be 'base' or 'pro'.")
    if time_range not in ("", *TIME_RANGES):
        raise WorkflowError("Choose one of the listed time ranges.")
    clean: dict[str, str] = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not isinstance(value, str) or len(value) > MAX_INPUT_CHARS:
            raise WorkflowError(f"Inputs are text of at most {MAX_INPUT_CHARS} characters.")
        if storable_text(name)[1] or storable_text(value)[1]:
            raise WorkflowError("The inputs contain characters that cannot be sent.")
        clean[name] = value.strip()
    # All of it is sent upstream and stored as the turn's question: a question's limit applies.
    if sum(len(name) + len(value) for name, value in clean.items()) > settings.MESSAGE_MAX_CHARS:
        raise WorkflowError(
            f"Inputs are limited to {settings.MESSAGE_MAX_CHARS} characters in all,"
            " as a question is."
        )
    missing = [name for name in choice.inputs if not clean.get(name)]
    if missing:
        raise WorkflowError(f"Fill in: {', '.join(missing)}.")
    return Workflow(
        template=choice.template,
        input=clean or None,
        model_name=model or None,
        time_range=time_range or None,
    )


def workflow_ask(*, user, form: Mapping[str, str]) -> TurnAsk:
    """Return the ask of a posted run form: a new Research Agent chat whose first turn runs the
    chosen workflow, titled by it; or raise WorkflowError (database thread)."""
    choice = {c.key: c for c in workflow_choices(user=user)}.get(form.get("workflow", ""))
    if choice is None:
        raise WorkflowError("That workflow is not available.")
    inputs: Any = {name: form.get(f"input_{name}", "") for name in choice.inputs}
    if choice.free_inputs and form.get("inputs_json", "").strip():
        try:
            inputs = json.loads(form["inputs_json"])
        except (ValueError, RecursionError):  # RecursionError: nested past what it parses
            raise WorkflowError("Inputs must be a JSON object of texts.") from None
        if not isinstance(inputs, dict):
            raise WorkflowError("Inputs must be a JSON object of texts.")
    workflow = workflow_of_form(
        choice,
        inputs=inputs,
        model=form.get("model", ""),
        time_range=form.get("time_range", ""),
    )
    shown = ", ".join(f"{k}: {v}" for k, v in (workflow.input or {}).items())
    return TurnAsk(
        chat=Chat(owner=user, provider=BIGDATA),
        question=f"Workflow “{choice.name}”" + (f" ({shown})" if shown else ""),
        research_effort="standard",
        parent_turn_id=None,
        save_options=False,
        workflow=workflow,
    )


# --- Views --------------------------------------------------------------------------------


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
    try:
        ask = await database_sync_to_async(workflow_ask)(user=user, form=request.POST)
        started = await ask_start(ask, SessionCheck(request.session))
    except (WorkflowError, TurnStartError) as refused:
        return await database_sync_to_async(_page)(request, error=str(refused))
    if started is None:  # signed out meanwhile (another tab): nothing was started
        return redirect(settings.LOGIN_URL)
    return redirect("chat_detail", chat_id=started.turn.turn.chat_id)


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
