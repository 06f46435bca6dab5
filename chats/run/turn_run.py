"""The run of a turn: read the agent's stream, log and relay each event, then store the answer.

A run is an asyncio task owned by the server process, not by the websocket that asked for it:
closing a tab must not kill an answer. The process's runs are kept by `RunRegistry`
(chats/run/registry.py); how a run's end is stored and announced is chats/run/finishes.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from contextlib import aclosing
from typing import Any

from django.conf import settings

from chats.agent import AgentError, stalled, subject
from chats.agent.events import AgentEvent, AnswerEvent, ChartEvent
from chats.agent.providers import ProviderStream, agent_name, open_stream
from chats.agent.redaction import StreamRedaction
from chats.agent.request import AgentRequest
from chats.agent.transcript import Transcript
from chats.answer import display
from chats.live.event_log import EventLog, get_event_log
from chats.live.protocol import publish_to_chat, turn_notice
from chats.metrics import TURNS_FINISHED, UPSTREAM_ERRORS
from chats.models import Turn
from chats.run.finishes import (
    Finish,
    Stored,
    announce_finished,
    fail_unfinishable,
    get_finish_batches,
)
from chats.run.rendering import arrived_chart, ended
from chats.run.storable import storable_event

logger = logging.getLogger(__name__)

# Errors before the first event mean the request was refused: the turn failed. Errors after it
# mean the answer was cut off: the turn was interrupted and keeps what arrived.
INTERRUPTING_KINDS = frozenset({"stalled", "dropped"})
SERVER_RESTARTED = {
    "status": Turn.Status.INTERRUPTED,
    "error": "The server restarted while this answer was being written.",
    "error_kind": Turn.ErrorKind.SERVER,
}


class TurnLimitReached(Exception):
    """The run passed one of the site's limits (AGENT_MAX_*); the message says which."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class TurnRun:
    def __init__(self, turn: Turn, request: AgentRequest) -> None:
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        self.agent = turn.chat.provider
        self.agent_name = agent_name(self.agent)  # mid-sentence: "the research agent"
        self.user_id = turn.chat.owner_id
        self.request = request
        self.transcript = Transcript()
        self.stop_requested = False
        self.write_failure: str | None = None  # set by the event log when it cannot store ours
        self.began = False  # run() was entered: from then on it records how it ended
        self.finishing = False
        self.sanitized_events = 0
        self.redaction = StreamRedaction()  # the configured secrets, masked in every event
        self.seq = 0  # events taken into the transcript and the log
        self.answer_chars = 0
        self.max_answer_chars = settings.AGENT_MAX_ANSWER_CHARS  # read again as the run begins
        self.task: asyncio.Task | None = None
        # The ids of the turns beside this one, when whoever started it knew them: none can be
        # added while it streams (one turn per chat), so its final card needs no query for them.
        self.siblings: list[int] | None = None
        self._deadline: asyncio.Timeout | None = None
        self._ends_at = 0.0

    async def run(self) -> None:
        self.began = True
        stream = open_stream(self.agent, self.request, on_retry=self._notice_retry)
        log = get_event_log()
        log.watch(self.turn_id, self._events_unsaveable)
        outcome: dict[str, Any]
        try:
            try:
                await self._read(stream, log)
            finally:
                if stream.malformed_lines:  # once per turn, not once per line
                    logger.warning(
                        "Turn %s: skipped %d malformed stream lines",
                        self.turn_id,
                        stream.malformed_lines,
                    )
            outcome = self._outcome_of_stream(stream.malformed_lines)
        except AgentError as error:
            UPSTREAM_ERRORS.labels(agent=self.agent, kind=error.kind).inc()
            status = (
                Turn.Status.INTERRUPTED if error.kind in INTERRUPTING_KINDS else Turn.Status.FAILED
            )
            outcome = {"status": status, "error": error.user_message, "error_kind": error.kind}
        except TurnLimitReached as limit:
            outcome = {
                "status": Turn.Status.INTERRUPTED,
                "error": limit.user_message,
                "error_kind": Turn.ErrorKind.LIMIT,
            }
        except asyncio.CancelledError:
            if self.write_failure is None and not self.stop_requested:
                # The server is shutting down: record what we have, then let the task end.
                await self._finish(stream, **SERVER_RESTARTED)
                raise
            # The event log's failure is filled in by _finish; otherwise the user stopped it.
            outcome = {"status": Turn.Status.STOPPED, "error": "", "error_kind": ""}
        except Exception:
            logger.exception("Turn %s failed unexpectedly", self.turn_id)
            outcome = {
                "status": Turn.Status.FAILED,
                "error": "Something went wrong on our side while reading the answer.",
                "error_kind": Turn.ErrorKind.SERVER,
            }
        await self._finish(stream, **outcome)

    async def _read(self, stream: ProviderStream, log: EventLog) -> None:
        """Read the stream into the transcript and the log, within the site's limits.

        The idle and duration limits count events, not bytes: a stream of keep-alive comments
        must not keep a turn streaming forever. One deadline, moved on by each event, serves both.
        """
        loop = asyncio.get_running_loop()
        idle = settings.AGENT_IDLE_TIMEOUT
        max_seconds = settings.AGENT_MAX_TURN_SECONDS
        ends_at = self._ends_at = loop.time() + max_seconds
        # Moving the deadline costs a timer; move it only when it has fallen behind noticeably.
        slack = min(1.0, idle / 10)
        max_events = settings.AGENT_MAX_EVENTS  # read once: a settings lookup per event adds up
        self.max_answer_chars = settings.AGENT_MAX_ANSWER_CHARS
        self.seq = 0
        try:
            async with asyncio.timeout_at(min(loop.time() + idle, ends_at)) as deadline:
                self._deadline = deadline
                async with aclosing(stream.events()) as events:
                    async for event in events:
                        idle_until = min(loop.time() + idle, ends_at)
                        if idle_until - (deadline.when() or 0.0) >= slack:
                            deadline.reschedule(idle_until)
                        if type(event) is ChartEvent:  # sanitised and drawn off the loop
                            event, data, replaced = await arrived_chart(event)
                        else:
                            event, data, replaced = storable_event(event)
                        self.sanitized_events += replaced
                        # Secrets masked before anything stores, relays or shows the event.
                        for masked, masked_data in self.redaction.events(event, data):
                            self._take(log, max_events, masked, masked_data)
        except TimeoutError as error:
            self._take_held(log, max_events)
            if loop.time() >= ends_at - slack:
                took = display.duration_text(max_seconds)
                raise TurnLimitReached(
                    f"The answer took longer than {took} and was stopped."
                ) from error
            raise stalled(self.agent_name, idle) from error
        except AgentError:
            self._take_held(log, max_events)  # a cut-off answer keeps all that arrived
            raise
        self._take_held(log, max_events)

    def _take(
        self, log: EventLog, max_events: int, event: AgentEvent, data: dict[str, Any]
    ) -> None:
        """Fold one event into the transcript and the log, within the site's limits."""
        self.seq += 1
        if self.seq > max_events:
            raise TurnLimitReached(
                f"The answer passed the limit of {max_events:,} events and was stopped there."
            )
        event, data, cut = self._within_answer_limit(event, data)
        self.transcript.apply(event)
        log.append(self.chat_id, self.turn_id, self.seq, event, data)
        if cut:
            raise TurnLimitReached(
                "The answer passed the limit of"
                f" {self.max_answer_chars:,} characters and was cut off there."
            )

    def _take_held(self, log: EventLog, max_events: int) -> None:
        """Take the end of the answer the redaction held back (it could have begun a secret)."""
        for held, held_data in self.redaction.flush():
            self._take(log, max_events, held, held_data)

    def _within_answer_limit(
        self, event: AgentEvent, data: dict[str, Any]
    ) -> tuple[AgentEvent, dict[str, Any], bool]:
        """Return the event (and its data) cut to what is left of AGENT_MAX_ANSWER_CHARS."""
        if not isinstance(event, AnswerEvent):
            return event, data, False
        room = max(self.max_answer_chars - self.answer_chars, 0)
        if len(event.content) <= room:
            self.answer_chars += len(event.content)
            return event, data, False
        self.answer_chars += room
        content = event.content[:room]
        return dataclasses.replace(event, content=content), {**data, "content": content}, True

    def _events_unsaveable(self, message: str) -> None:
        """The event log cannot store this turn's events: stop reading (the log says why)."""
        self.write_failure = message
        if self.task is not None and not self.finishing:
            self.task.cancel()

    def _outcome_of_stream(self, malformed_lines: int) -> dict[str, Any]:
        transcript = self.transcript
        if transcript.failed:  # the agent reported an error in its stream
            UPSTREAM_ERRORS.labels(agent=self.agent, kind=Turn.ErrorKind.AGENT).inc()
            return {
                "status": Turn.Status.FAILED,
                "error": transcript.error,
                "error_kind": Turn.ErrorKind.AGENT,
            }
        if transcript.completed:
            return {"status": Turn.Status.COMPLETE, "error": "", "error_kind": ""}
        error = f"{subject(self.agent_name)}'s stream ended before the answer was complete."
        if malformed_lines:
            error += f" It also sent {malformed_lines} unreadable lines, which were skipped."
        return {
            "status": Turn.Status.INTERRUPTED,
            "error": error,
            "error_kind": Turn.ErrorKind.INCOMPLETE,
        }

    async def end_unbegun(self) -> None:
        """Record a run cancelled before it began (asked for as the server stopped) the way
        a run the server stops records itself: interrupted."""
        await self._finish(None, **SERVER_RESTARTED)

    async def _finish(
        self, stream: ProviderStream | None, *, status: str, error: str, error_kind: str
    ) -> None:
        """Store the outcome and announce it; a turn that cannot be stored is still finished.
        `stream`: what the agent's stream said besides its events (None: it never opened)."""
        self.finishing = True
        log = get_event_log()
        await log.flushed()  # every event is logged and relayed before the final frame
        failure = log.failure(self.turn_id) or self.write_failure
        log.forget(self.turn_id)
        if failure is not None:
            status, error, error_kind = Turn.Status.FAILED, failure, Turn.ErrorKind.UNSAVED
        error = self.redaction.redactor.text(error)  # a client's error may quote the agent
        TURNS_FINISHED.labels(agent=self.agent, status=status).inc()
        logger.info("Turn %s ended: %s", self.turn_id, status)

        try:
            end = await ended(  # citations, HTML, charts: never on the database thread
                self.turn_id,
                self.transcript,
                status,
                error=error,
                error_kind=error_kind,
                malformed_lines=stream.malformed_lines if stream is not None else 0,
                sanitized_events=self.sanitized_events,
                execution_id=stream.execution_id if stream is not None else "",
            )
            await get_finish_batches().submit(Finish(end, self.siblings))  # stored, announced
        except Exception as finish_error:
            logger.exception("Storing the answer of turn %s failed", self.turn_id)
            turn = await fail_unfinishable(
                self.turn_id,
                failure
                or f"This answer could not be saved ({type(finish_error).__name__})."
                " Retry to ask again.",
            )
            await announce_finished([Stored(turn)])

    async def _notice_retry(self, message: str, delay: float) -> None:
        if self._deadline is not None:  # waiting out a retry is not the agent falling silent
            loop = asyncio.get_running_loop()
            idle_until = loop.time() + delay + settings.AGENT_IDLE_TIMEOUT
            self._deadline.reschedule(min(idle_until, self._ends_at))
        notice = turn_notice(self.turn_id, display.retry_notice(message, delay))
        await publish_to_chat(self.chat_id, notice)
