"""The Research Agent's Workflows (docs/PROTOCOL.md, "Workflows"): the request body, the `delta`
envelope and its `execution_id`, and a run resumed with it when its stream drops or stalls.

A run is asked like a question (`AgentRequest`, its `workflow` set) and its events are the
Research Agent's, read by its adapter; past the stream a workflow's turn is a turn like any
other. The client is the Research Agent's (`bigdata.AgentStream`: headers, retries before the
first event, the same error wording), posting the Workflows body to the Workflows endpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from chats.agent._http import AgentError
from chats.agent.events import AgentEvent
from chats.agent.providers.attempts import RetryNotice
from chats.agent.providers.bigdata import AgentStream, BigdataAdapter
from chats.agent.request import AgentRequest, AgentSettings, Workflow
from chats.agent.sse import StreamMessage

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
STALL_FRACTION = 0.8  # of the idle timeout: the silence after which a stream is resumed
MAX_EXECUTION_ID_CHARS = 500  # what `Turn.execution_id` holds


def workflow_body(workflow: Workflow, execution_id: str = "") -> dict[str, Any]:
    """The request body: the workflow's fields that are set, and the run to resume, if any."""
    body = {
        "template": workflow.template,
        "input": workflow.input,
        "model_name": workflow.model_name,
        "time_range": workflow.time_range,
        "execution_id": execution_id or None,
    }
    return {key: value for key, value in body.items() if value not in (None, {})}


class WorkflowAdapter(BigdataAdapter):
    """The Research Agent's adapter (it reads the `delta` envelope), keeping the envelope's
    `execution_id`."""

    def __init__(self) -> None:
        self.execution_id = ""

    def feed(self, message: StreamMessage) -> list[AgentEvent] | None:
        execution_id = message.document.get("execution_id")
        if isinstance(execution_id, str):
            self.execution_id = execution_id[:MAX_EXECUTION_ID_CHARS]
        return super().feed(message)


class _Connection(AgentStream):
    """One connection to the Workflows endpoint, resuming `execution_id` when it is set."""

    def __init__(
        self,
        request: AgentRequest,
        workflow: Workflow,
        config: AgentSettings,
        *,
        execution_id: str,
        on_retry: RetryNotice | None,
    ) -> None:
        super().__init__(request, config, on_retry=on_retry)
        self.workflow = workflow
        self.resuming = execution_id
        self.adapter = WorkflowAdapter()

    def _body(self) -> dict[str, Any]:
        return workflow_body(self.workflow, self.resuming)

    def _adapter(self) -> WorkflowAdapter:
        return self.adapter


class WorkflowStream:
    """A workflow's events, resumed with its `execution_id` when the stream drops or stalls,
    up to `max_resumes` times; `execution_id` is the run's, once its stream has named it.

    A resumed stream may replay the execution from its start (the demo agent does) or go on
    from where it was: when its first event equals the first one we had, we skip as many as
    we already have; otherwise everything it sends is new.

    `config` is the Workflows endpoint's; its idle timeout is shortened (`STALL_FRACTION`) so
    that a stalled stream is resumed here before the run's own idle limit ends the turn.
    """

    RESUMABLE = frozenset({"dropped", "stalled"})

    def __init__(
        self,
        request: AgentRequest,
        config: AgentSettings,
        *,
        on_retry: RetryNotice | None = None,
        max_resumes: int = 3,
    ) -> None:
        if request.workflow is None:
            raise ValueError("A WorkflowStream runs a request whose `workflow` is set.")
        self.request = request
        self.workflow = request.workflow
        self.config = replace(config, idle_timeout=config.idle_timeout * STALL_FRACTION)
        self.on_retry = on_retry
        self.max_resumes = max_resumes
        self.malformed_lines = 0
        self.execution_id = ""

    async def events(self) -> AsyncIterator[AgentEvent]:
        resumes, delivered, first = 0, 0, None
        while True:
            connection = _Connection(
                self.request,
                self.workflow,
                self.config,
                execution_id=self.execution_id,
                on_retry=self.on_retry,
            )
            skip, checking = 0, connection.resuming != ""
            try:
                async for event in connection.events():
                    self.execution_id = connection.adapter.execution_id or self.execution_id
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
                if error.status == 404 and connection.resuming:
                    raise AgentError(
                        "The workflow's run is no longer available to resume. Run it again.",
                        kind="cannot_continue",
                        status=404,
                    ) from error
                resumable = error.kind in self.RESUMABLE and self.execution_id
                if not resumable or resumes >= self.max_resumes:
                    raise
                resumes += 1
                if self.on_retry is not None:
                    await self.on_retry("The workflow's stream was cut off.", 0)
            finally:
                self.malformed_lines += connection.malformed_lines
