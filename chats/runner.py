"""The run of a turn: read the agent's stream, log and relay each event, then store the answer.

A run is an asyncio task owned by the server process, not by the websocket that asked for it:
closing a tab must not kill an answer. Stop requests reach a run through the channel layer
(the run may live in another process); a lease renewed by `RunRegistry` lets any process tell
when the run's own process died.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.template.loader import render_to_string

from . import display
from .agent.client import AgentError, AgentRequest, AgentSettings, AgentStream
from .agent.transcript import Transcript
from .event_log import get_event_log
from .models import Turn
from .protocol import (
    TurnCardFrame,
    chat_group,
    control_group,
    publish,
    turn_card,
    turn_notice,
    turn_stop,
)
from .selectors import branch_turn
from .services import turn_finish, turn_interrupt_orphans, turn_renew_leases

logger = logging.getLogger(__name__)

# Errors before the first event mean the request was refused: the turn failed. Errors after it
# mean the answer was cut off: the turn was interrupted and keeps what arrived.
INTERRUPTING_KINDS = frozenset({"stalled", "dropped"})


LISTENER_CLOSE = "turn.listener.close"


def agent_settings() -> AgentSettings:
    return AgentSettings(
        url=settings.RESEARCH_AGENT_URL,
        api_key=settings.BIGDATA_API_KEY or settings.DEMO_AGENT_TOKEN,
        connect_timeout=settings.AGENT_CONNECT_TIMEOUT,
        idle_timeout=settings.AGENT_IDLE_TIMEOUT,
        max_retries=settings.AGENT_MAX_RETRIES,
    )


class TurnRun:
    def __init__(self, turn: Turn, request: AgentRequest) -> None:
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        self.request = request
        self.transcript = Transcript()
        self.stop_requested = False
        self.task: asyncio.Task | None = None

    def open_stream(self) -> AgentStream:
        return AgentStream(self.request, agent_settings(), on_retry=self._notice_retry)

    async def run(self) -> None:
        stream = self.open_stream()
        log = get_event_log()
        outcome: dict[str, Any]
        seq = 0
        try:
            async for event in stream.events():
                seq += 1
                self.transcript.apply(event)
                log.append(self.chat_id, self.turn_id, seq, event)
            outcome = self._outcome_of_stream(stream.malformed_lines)
        except AgentError as error:
            status = (
                Turn.Status.INTERRUPTED if error.kind in INTERRUPTING_KINDS else Turn.Status.FAILED
            )
            outcome = {"status": status, "error": error.user_message, "error_kind": error.kind}
        except asyncio.CancelledError:
            if not self.stop_requested:
                # The server is shutting down: record what we have, then let the task end.
                await self._finish(
                    stream,
                    status=Turn.Status.INTERRUPTED,
                    error="The server restarted while this answer was being written.",
                    error_kind=Turn.ErrorKind.SERVER,
                )
                raise
            outcome = {"status": Turn.Status.STOPPED, "error": "", "error_kind": ""}
        except Exception:
            logger.exception("Turn %s failed unexpectedly", self.turn_id)
            outcome = {
                "status": Turn.Status.FAILED,
                "error": "Something went wrong on our side while reading the answer.",
                "error_kind": Turn.ErrorKind.SERVER,
            }
        await self._finish(stream, **outcome)

    def _outcome_of_stream(self, malformed_lines: int) -> dict[str, Any]:
        transcript = self.transcript
        if transcript.failed:
            return {
                "status": Turn.Status.FAILED,
                "error": transcript.error,
                "error_kind": Turn.ErrorKind.AGENT,
            }
        if transcript.completed:
            return {"status": Turn.Status.COMPLETE, "error": "", "error_kind": ""}
        error = "The research agent's stream ended before the answer was complete."
        if malformed_lines:
            error += f" It also sent {malformed_lines} unreadable lines, which were skipped."
        return {
            "status": Turn.Status.INTERRUPTED,
            "error": error,
            "error_kind": Turn.ErrorKind.INCOMPLETE,
        }

    async def _finish(
        self, stream: AgentStream, *, status: str, error: str, error_kind: str
    ) -> None:
        await get_event_log().flush()  # every event is logged and relayed before the final frame
        turn = await database_sync_to_async(turn_finish)(
            turn_id=self.turn_id,
            transcript=self.transcript,
            status=status,
            error=error,
            error_kind=error_kind,
            malformed_lines=stream.malformed_lines,
        )
        if turn is not None:
            await publish_turn_finished(turn)

    async def _notice_retry(self, message: str, delay: float) -> None:
        notice = turn_notice(self.turn_id, display.retry_notice(message, delay))
        await publish(chat_group(self.chat_id), notice)


def render_turn_card(turn: Turn) -> str:
    return render_to_string("chats/_turn.html", {"item": branch_turn(turn=turn)})


async def turn_frame(kind: Literal["turn.started", "turn.finished"], turn: Turn) -> TurnCardFrame:
    """A frame that carries the turn's card as the page would render it now."""

    def render() -> tuple[str, str]:
        return render_turn_card(turn), turn.chat.title if kind == "turn.started" else ""

    html, chat_title = await database_sync_to_async(render)()
    return turn_card(
        kind,
        turn_id=turn.pk,
        parent_id=turn.parent_id,
        status=turn.status,
        html=html,
        chat_title=chat_title,
    )


async def publish_turn_started(turn: Turn) -> None:
    await publish(chat_group(turn.chat_id), await turn_frame("turn.started", turn))


async def publish_turn_finished(turn: Turn) -> None:
    await publish(chat_group(turn.chat_id), await turn_frame("turn.finished", turn))


class RunRegistry:
    """The runs of this process: keeps their tasks alive, renews their leases, sweeps orphans."""

    def __init__(self) -> None:
        self.runs: dict[int, TurnRun] = {}
        self._heartbeat: asyncio.Task | None = None

    async def start(
        self, turn: Turn, request: AgentRequest, *, run_class: type[TurnRun] | None = None
    ) -> TurnRun:
        run = (run_class or TurnRun)(turn, request)
        self.runs[run.turn_id] = run
        run.task = asyncio.create_task(self._supervise(run), name=f"turn-{run.turn_id}")
        self.ensure_heartbeat()
        return run

    async def _supervise(self, run: TurnRun) -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(control_group(run.turn_id), channel)
        listener = asyncio.create_task(self._listen_for_stop(run, channel))
        try:
            await run.run()
        finally:
            await layer.group_discard(control_group(run.turn_id), channel)
            # Ask the listener to return rather than cancel it: channels_redis reads every
            # channel of a process in one shared receive, and cancelling it mid-read drops a
            # message that was meant for another channel, such as a page's turn.finished.
            if not listener.done():
                await layer.send(channel, {"type": LISTENER_CLOSE})
            await asyncio.wait([listener], timeout=5)
            self.runs.pop(run.turn_id, None)

    async def _listen_for_stop(self, run: TurnRun, channel: str) -> None:
        layer = get_channel_layer()
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") == LISTENER_CLOSE:
                    return
                if message.get("type") == "turn.stop" and run.task is not None:
                    run.stop_requested = True
                    run.task.cancel()
                    return
        except asyncio.CancelledError:
            raise
        except Exception:  # the layer went away (shutdown); the run itself carries on
            logger.warning("Stop listener for turn %s ended", run.turn_id, exc_info=True)

    def ensure_heartbeat(self) -> None:
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.create_task(self._beat(), name="turn-heartbeat")

    async def _beat(self) -> None:
        while True:
            try:
                if self.runs:
                    await database_sync_to_async(turn_renew_leases)(turn_ids=list(self.runs))
                await sweep_orphans()
            except Exception:
                logger.exception("Turn heartbeat failed")
            await asyncio.sleep(settings.TURN_HEARTBEAT_SECONDS)

    async def shutdown(self) -> None:
        """Cancel this process's runs; each records itself interrupted before it ends."""
        tasks = [run.task for run in self.runs.values() if run.task]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._heartbeat:
            self._heartbeat.cancel()


async def sweep_orphans() -> None:
    for turn in await database_sync_to_async(turn_interrupt_orphans)():
        await publish_turn_finished(turn)


async def request_stop(turn_id: int) -> None:
    """Ask the run of `turn_id`, in whichever process it lives, to stop."""
    await publish(control_group(turn_id), turn_stop())


_registries: dict[asyncio.AbstractEventLoop, RunRegistry] = {}


def get_registry() -> RunRegistry:
    loop = asyncio.get_running_loop()
    for stale in [known for known in _registries if known.is_closed()]:
        del _registries[stale]
    return _registries.setdefault(loop, RunRegistry())
