"""The demo agent's Workflows endpoint: `POST .../v1/workflow/execute` (docs/PROTOCOL.md,
"Workflows").

A workflow is a templated question run through the same research pipeline as a plain request
(`ResearchTurn`), streamed in the Workflows envelope `{"request_id", "execution_id", "delta"}`.

Resuming, as designed here: an execution keeps the events it has sent and its place in the
pipeline, in memory, for a bounded number of executions. A request carrying `execution_id`
replays that execution from its first event, then goes on where it had stopped; the client
skips what it already has (`chats/agent/providers/workflows.py`). So a resumed stream is the
whole execution, whether the first connection dropped after one event or after all of them.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Protocol

from demo_agent.errors import HttpError
from demo_agent.options import RequestOptions
from demo_agent.tokens import BranchContext
from demo_agent.turn import Finished, Heartbeat, Library, Pause, ResearchTurn, Step
from demo_agent.wire import (
    HEARTBEAT,
    Receive,
    Send,
    end_stream,
    send_chunk,
    send_json,
    start_stream,
)

PATH_SUFFIX = "/workflow/execute"
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
# Documented as `last_24_hours` … `last_365_days`; the steps between are our reading.
TIME_RANGES = {
    "last_24_hours": 1,
    "last_7_days": 7,
    "last_30_days": 30,
    "last_90_days": 90,
    "last_180_days": 180,
    "last_365_days": 365,
}
MAX_EXECUTIONS = 256
MAX_INPUT_CHARS = 500


@dataclass(frozen=True)
class BuiltinTemplate:
    name: str
    prompt: str  # placeholders are {{name}}
    expected_output: str = ""

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(PLACEHOLDER.findall(self.prompt)))


BUILTIN_TEMPLATES = {
    "demo.earnings_brief": BuiltinTemplate(
        "Earnings brief", "How did {{company}} do last quarter?", "bullet points"
    ),
    "demo.risk_scan": BuiltinTemplate("Risk scan", "What are the main risks for {{company}}?"),
}


@dataclass
class Execution:
    id: str
    template: Any  # as the request sent it, to refuse a resume of another template
    steps: Iterator[Step]
    sent: list[dict[str, Any]] = field(default_factory=list)  # every delta so far
    reader: object | None = None  # the stream now reading `steps`; an older one stops
    finished: bool = False


class Agent(Protocol):
    """What the workflows take from the demo agent that serves them (`app.DemoAgentApp`)."""

    pro_entitled: bool

    @property
    def library(self) -> Library: ...

    async def sleep(self, seconds: float, disconnected: asyncio.Event) -> None: ...


class DemoWorkflows:
    def __init__(self, app: Agent) -> None:
        self._app = app
        self._executions: OrderedDict[str, Execution] = OrderedDict()

    async def serve(self, body: bytes, receive: Receive, send: Send, disconnected) -> None:
        try:
            execution = self._execution_for(_parse(body))
        except HttpError as error:
            await send_json(send, error.status, {"detail": error.detail})
            return
        await self._stream(execution, send, disconnected)

    def _execution_for(self, data: dict[str, Any]) -> Execution:
        execution_id = data.get("execution_id")
        if execution_id is not None:
            execution = (
                self._executions.get(execution_id) if isinstance(execution_id, str) else None
            )
            if execution is None:
                raise HttpError(404, "Execution not found")
            if "template" in data and data["template"] != execution.template:
                raise HttpError(409, "persistence mismatch: the execution ran another template")
            return execution
        prompt, expected = _template(data.get("template"))
        inputs = data.get("input") or {}
        if not isinstance(inputs, dict) or not all(
            isinstance(v, str) and len(v) <= MAX_INPUT_CHARS for v in inputs.values()
        ):
            raise HttpError(422, [_error("input", "Input should be an object of strings")])
        missing = [name for name in PLACEHOLDER.findall(prompt) if not inputs.get(name, "").strip()]
        if missing:
            raise HttpError(422, [_error("input", f"Missing input: {', '.join(missing)}")])
        message = PLACEHOLDER.sub(lambda m: inputs[m[1]].strip(), prompt)
        model = data.get("model_name") or "base"
        if model not in ("base", "pro"):
            raise HttpError(422, [_error("model_name", "Input should be 'base' or 'pro'")])
        if model == "pro" and not self._app.pro_entitled:
            raise HttpError(403, "This API key is not entitled to the pro model tier.")
        time_range = data.get("time_range")
        if time_range is not None and time_range not in TIME_RANGES:
            raise HttpError(422, [_error("time_range", "Input should be a documented time range")])
        options = RequestOptions(
            model_name=model,
            expected_output=expected,
            period_start=self._period_start(time_range),
        )
        turn = ResearchTurn(
            message=message,
            research_effort="standard",
            context=BranchContext(),
            library=self._app.library,
            options=options,
        )
        execution = Execution(f"exec-{secrets.token_hex(8)}", data.get("template"), turn.steps())
        self._executions[execution.id] = execution
        while len(self._executions) > MAX_EXECUTIONS:
            self._executions.popitem(last=False)
        return execution

    def _period_start(self, time_range: str | None) -> str:
        """The demo corpus is dated: ranges count back from its newest document, not today."""
        if time_range is None:
            return ""
        newest = max(str(d.source.get("ts", ""))[:10] for d in self._app.library.corpus.documents)
        return (date.fromisoformat(newest) - timedelta(days=TIME_RANGES[time_range])).isoformat()

    async def _stream(self, execution: Execution, send: Send, disconnected) -> None:
        request_id = f"req-{secrets.token_hex(6)}"
        reader = object()
        execution.reader = reader

        def envelope(delta: dict[str, Any]) -> bytes:
            document = {"request_id": request_id, "execution_id": execution.id, "delta": delta}
            return b"data: " + json.dumps(document, ensure_ascii=False).encode() + b"\n\n"

        await start_stream(send)
        for delta in list(execution.sent):
            await send_chunk(send, envelope(delta))
        while not execution.finished:
            if disconnected.is_set() or execution.reader is not reader:
                return
            step = next(execution.steps, None)
            if step is None:
                execution.finished = True
                break
            if isinstance(step, Pause):
                await self._app.sleep(step.seconds, disconnected)
                continue
            if isinstance(step, Heartbeat):
                await send_chunk(send, HEARTBEAT)
                continue
            if isinstance(step, Finished):
                step = {"type": "COMPLETE", "consumption": step.consumption}
            execution.sent.append(step)  # before sending: a drop now is replayed on resume
            await send_chunk(send, envelope(step))
        await end_stream(send)


def _parse(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise HttpError(400, f"Invalid JSON body: {error}") from None
    if not isinstance(data, dict):
        raise HttpError(422, [_error("body", "Input should be a valid dictionary")])
    if "template" not in data and "execution_id" not in data:
        raise HttpError(422, [_error("template", "Field required")])
    return data


def _template(template: Any) -> tuple[str, str]:
    """Return the prompt and expected output of a built-in id or an inline template object."""
    if isinstance(template, str):
        builtin = BUILTIN_TEMPLATES.get(template)
        if builtin is None:
            raise HttpError(404, "Template not found")
        return builtin.prompt, builtin.expected_output
    if isinstance(template, dict) and isinstance(template.get("prompt"), str):
        expected = template.get("expected_output")
        return template["prompt"], expected if isinstance(expected, str) else ""
    raise HttpError(422, [_error("template", "A template id, or an object with a string 'prompt'")])


def _error(field_name: str, msg: str) -> dict[str, Any]:
    return {"loc": ["body", field_name], "msg": msg, "type": "value_error"}
