"""Workflows (docs/PROTOCOL.md, "Workflows"): which templates a user can run, starting a run as a
chat turn, and reading its stream, resumed with its `execution_id` when the connection drops.

A workflow run is a turn like any other past its stream: its events go through the same log,
relay and page, so it streams, survives a reload and is stored exactly like an answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from chats.agent import AgentError
from chats.agent.events import AgentEvent
from chats.agent.providers import BIGDATA, bigdata_settings
from chats.agent.providers.bigdata import AgentStream, BigdataAdapter
from chats.agent.sse import StreamMessage
from chats.answer import display
from chats.errors import TurnStartError
from chats.models import Chat, Turn, WorkflowTemplate
from chats.run.cards import publish_turn_started
from chats.run.registry import get_registry
from chats.run.storable import storable_text
from chats.run.turn_run import TurnRun
from chats.usage.limits import usage_budgets

logger = logging.getLogger(__name__)

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# Documented as `last_24_hours` … `last_365_days`; the steps between are our reading.
TIME_RANGES = (
    "last_24_hours",
    "last_7_days",
    "last_30_days",
    "last_90_days",
    "last_180_days",
    "last_365_days",
)
MODELS = ("base", "pro")
MAX_INPUT_CHARS = 500
WORKFLOW_PATH = "/v1/workflow/execute"
STALL_FRACTION = 0.8  # of AGENT_IDLE_TIMEOUT: silence after which a stream is resumed


def workflow_url() -> str:
    """WORKFLOW_URL, else the Workflows endpoint on the research agent's host."""
    if settings.WORKFLOW_URL:
        return settings.WORKFLOW_URL
    parts = urlsplit(settings.RESEARCH_AGENT_URL)
    if parts.path == settings.DEMO_AGENT_PATH:
        return urlunsplit(parts._replace(path=settings.DEMO_WORKFLOW_PATH))
    return urlunsplit((parts.scheme, parts.netloc, WORKFLOW_PATH, "", ""))


# --- Templates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowChoice:
    key: str  # "id:<id>", "saved:<pk>" or "demo:<id>": what the run form posts
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
    """Configured template ids, the user's saved templates, and the demo agent's built-ins."""
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
    if settings.DEMO_AGENT_ENABLED:
        from demo_agent.workflows import BUILTIN_TEMPLATES

        for tid, builtin in BUILTIN_TEMPLATES.items():
            choices.append(
                WorkflowChoice(f"demo:{tid}", builtin.name, tid, builtin.inputs, kind="Demo agent")
            )
    return choices


# --- The request ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowRequest:
    """The Workflows request body; `AgentStream` posts `payload()` like a research request."""

    template: str | dict[str, Any]
    input: dict[str, str] | None = None
    model_name: str | None = None
    time_range: str | None = None
    execution_id: str | None = None

    # What the HTTP error wording reads of a research request: a workflow continues nothing.
    chat_id = None
    from_checkpoint_id = None

    def payload(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (None, {})}

    def entitled_options(self) -> list[tuple[str, tuple[str, ...]]]:
        return [("the pro model", ("pro", "model"))] if self.model_name == "pro" else []


class WorkflowError(ValueError):
    """A run form we refuse; the message is shown on the page."""


def workflow_request(
    choice: WorkflowChoice, *, inputs: dict[str, Any], model: str, time_range: str
) -> WorkflowRequest:
    """Return the request for a run form, or raise WorkflowError saying what is wrong."""
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
    return WorkflowRequest(
        template=choice.template,
        input=clean or None,
        model_name=model or None,
        time_range=time_range or None,
    )


@transaction.atomic
def workflow_turn_start(*, owner, choice: WorkflowChoice, request: WorkflowRequest) -> Turn:
    """Create a chat whose first turn runs the workflow; refused at the user's turn limit."""
    list(get_user_model().objects.select_for_update().filter(pk=owner.pk).values("pk"))
    now = timezone.now()
    running = Turn.objects.streaming().filter(lease_expires_at__gt=now, chat__owner=owner)
    if running.count() >= settings.AGENT_MAX_CONCURRENT_TURNS:
        raise TurnStartError(
            f"You already have {settings.AGENT_MAX_CONCURRENT_TURNS} answers being written."
            " Run the workflow when one of them has finished."
        )
    usage_budgets(owner_ids=[owner.pk], now=now).admit(owner_id=owner.pk, agent=BIGDATA)
    shown = ", ".join(f"{k}: {v}" for k, v in (request.input or {}).items())
    question = f"Workflow “{choice.name}”" + (f" ({shown})" if shown else "")
    chat = Chat.objects.create(owner=owner, title=display.chat_title(question), provider=BIGDATA)
    workflow = {k: v for k, v in asdict(request).items() if k != "execution_id"}
    turn = Turn.objects.create(
        chat=chat,
        question=question,
        workflow=workflow,
        lease_expires_at=now + timedelta(seconds=settings.TURN_LEASE_SECONDS),
    )
    chat.active_turn = turn
    chat.save(update_fields=["active_turn"])
    return turn


# --- The run ----------------------------------------------------------------------------------


class WorkflowAdapter(BigdataAdapter):
    """The Bigdata adapter, also keeping the `execution_id` of the `delta` envelope."""

    def __init__(self) -> None:
        self.execution_id = ""

    def feed(self, message: StreamMessage) -> list[AgentEvent] | None:
        document = message.document
        if isinstance(document, dict) and isinstance(document.get("execution_id"), str):
            self.execution_id = document["execution_id"][:500]
        return super().feed(message)


class WorkflowStream:
    """A workflow's events, resumed with its `execution_id` when the stream drops or stalls.

    A resumed stream may replay the execution from its start (the demo agent does) or go on
    from where it was: when its first event equals the first one we had, we skip as many as
    we already have; otherwise everything it sends is new.
    """

    RESUMABLE = frozenset({"dropped", "stalled"})

    def __init__(self, run: WorkflowRun) -> None:
        self.run = run
        self.malformed_lines = 0
        self.execution_id = run.execution_id

    async def events(self) -> AsyncIterator[AgentEvent]:
        resumes, delivered, first = 0, 0, None
        while True:
            adapter = WorkflowAdapter()
            request = replace(self.run.request, execution_id=self.execution_id or None)
            # Read timeouts come before the run's own idle limit (chats/run/turn_run.py), so a
            # stalled stream is resumed here instead of ending the turn.
            connection = bigdata_settings()
            connection = replace(
                connection,
                url=workflow_url(),
                idle_timeout=connection.idle_timeout * STALL_FRACTION,
            )
            stream = AgentStream(
                request,
                connection,
                on_retry=self.run.notice,
                adapter=adapter,
            )
            skip, checking = 0, resumes > 0 or self.execution_id != ""
            try:
                async for event in stream.events():
                    await self._keep(adapter.execution_id)
                    if checking:
                        checking = False
                        skip = delivered if first is not None and event.data == first else 0
                    if skip:
                        skip -= 1
                        continue
                    if first is None:
                        first = event.data
                    delivered += 1
                    yield event
                return
            except AgentError as error:
                if error.status == 409:
                    raise AgentError(
                        "The workflow could not go on: the agent reports a persistence mismatch"
                        f" ({error.user_message.rstrip('.')}). Run the workflow again.",
                        kind="http",
                        status=409,
                    ) from error
                if error.status == 404 and request.execution_id:
                    raise AgentError(
                        "The workflow's run is no longer available to resume. Run it again.",
                        kind="cannot_continue",
                        status=404,
                    ) from error
                resumable = error.kind in self.RESUMABLE and self.execution_id
                if not resumable or resumes >= settings.WORKFLOW_MAX_RESUMES:
                    raise
                resumes += 1
                await self.run.notice("The workflow's stream was cut off.", 0)
            finally:
                self.malformed_lines += stream.malformed_lines

    async def _keep(self, execution_id: str) -> None:
        if execution_id and execution_id != self.execution_id:
            self.execution_id = execution_id
            await database_sync_to_async(Turn.objects.filter(pk=self.run.turn_id).update)(
                execution_id=execution_id
            )


class WorkflowRun(TurnRun):
    """The run of a workflow turn: the Workflows endpoint, resumed by `execution_id`."""

    def __init__(self, turn: Turn, request: Any) -> None:
        super().__init__(turn, request)
        self.execution_id = turn.execution_id

    def agent_stream(self) -> WorkflowStream:
        return WorkflowStream(self)

    async def notice(self, message: str, delay: float) -> None:
        await self._notice_retry(message, delay)


async def workflow_start(turn: Turn, request: WorkflowRequest) -> None:
    """Start the run of a workflow turn in this process and announce it to its chat."""
    await publish_turn_started(turn)
    await get_registry().start(turn, request, run_class=WorkflowRun)  # type: ignore[arg-type]
