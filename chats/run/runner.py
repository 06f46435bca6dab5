"""The run of a turn: read the agent's stream, log and relay each event, then store the answer.

A run is an asyncio task owned by the server process, not by the websocket that asked for it:
closing a tab must not kill an answer. Stop requests reach a run through the channel layer
(the run may live in another process); a lease renewed by `RunRegistry` lets any process tell
when the run's own process died.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db.models import prefetch_related_objects
from django.template.loader import render_to_string

from chats.agent.client import AgentError, AgentRequest
from chats.agent.events import AgentEvent, AnswerEvent, ChartEvent
from chats.agent.providers import ProviderRequest, ProviderStream, open_stream
from chats.agent.redaction import StreamRedaction
from chats.agent.transcript import Transcript
from chats.answer import display
from chats.library.search import get_search_index_queue
from chats.live.event_log import EventLog, get_event_log
from chats.live.protocol import (
    CardKind,
    TurnCardFrame,
    control_group,
    publish,
    publish_to_chat,
    publish_to_chats,
    turn_card,
    turn_notice,
    turn_stop,
)
from chats.loop.batches import DatabaseBatches
from chats.loop.per_loop import PerLoop
from chats.models import Turn
from chats.run.rendering import arrived_chart, rendered
from chats.run.storable import storable_event
from chats.selectors import BranchTurn, branch_turn
from chats.services import (
    TurnEnd,
    turn_fail_unsaved,
    turn_finish_many,
    turn_interrupt_orphans,
    turn_renew_leases,
)
from chats.verify.check import start_source_checks

logger = logging.getLogger(__name__)

# Errors before the first event mean the request was refused: the turn failed. Errors after it
# mean the answer was cut off: the turn was interrupted and keeps what arrived.
INTERRUPTING_KINDS = frozenset({"stalled", "dropped"})
SERVER_RESTARTED = {
    "status": Turn.Status.INTERRUPTED,
    "error": "The server restarted while this answer was being written.",
    "error_kind": Turn.ErrorKind.SERVER,
}


LISTENER_CLOSE = "turn.listener.close"


class TurnLimitReached(Exception):
    """The run passed one of the site's limits (AGENT_MAX_*); the message says which."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class TurnRun:
    def __init__(self, turn: Turn, request: AgentRequest | ProviderRequest) -> None:
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        self.agent = turn.chat.provider
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

    def agent_stream(self):
        """The run's events; a workflow run reads another endpoint (chats/run/workflows.py)."""
        return open_stream(self.agent, self.request, on_retry=self._notice_retry)

    async def run(self) -> None:
        self.began = True
        stream = self.agent_stream()
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
                await self._finish(stream.malformed_lines, **SERVER_RESTARTED)
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
        await self._finish(stream.malformed_lines, **outcome)

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
            raise AgentError(
                f"The research agent sent nothing for {idle:g} s, so the answer was cut off.",
                kind="stalled",
            ) from error
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

    async def end_unbegun(self) -> None:
        """Record a run cancelled before it began (asked for as the server stopped) the way
        a run the server stops records itself: interrupted."""
        await self._finish(0, **SERVER_RESTARTED)

    async def _finish(
        self, malformed_lines: int, *, status: str, error: str, error_kind: str
    ) -> None:
        """Store the outcome and announce it; a turn that cannot be stored is still finished."""
        self.finishing = True
        log = get_event_log()
        await log.flush()  # every event is logged and relayed before the final frame
        failure = log.failure(self.turn_id) or self.write_failure
        log.forget(self.turn_id)
        if failure is not None:
            status, error, error_kind = Turn.Status.FAILED, failure, Turn.ErrorKind.UNSAVED
        error = self.redaction.redactor.text(error)  # a client's error may quote the agent

        end = TurnEnd(
            turn_id=self.turn_id,
            transcript=self.transcript,
            status=status,
            error=error,
            error_kind=error_kind,
            malformed_lines=malformed_lines,
            sanitized_events=self.sanitized_events,
        )
        try:
            end = await rendered(end)  # citations, HTML, charts: off the loop and database thread
            await get_finish_batches().submit(Finish(end, self.siblings))  # stored, announced
        except Exception as finish_error:
            logger.exception("Storing the answer of turn %s failed", self.turn_id)
            turn = await _fail_unfinishable(
                self.turn_id,
                failure
                or f"This answer could not be saved ({type(finish_error).__name__})."
                " Retry to ask again.",
            )
            await _announce_finished([(turn, None)])

    async def _notice_retry(self, message: str, delay: float) -> None:
        if self._deadline is not None:  # waiting out a retry is not the agent falling silent
            loop = asyncio.get_running_loop()
            idle_until = loop.time() + delay + settings.AGENT_IDLE_TIMEOUT
            self._deadline.reschedule(min(idle_until, self._ends_at))
        notice = turn_notice(self.turn_id, display.retry_notice(message, delay))
        await publish_to_chat(self.chat_id, notice)


def render_turn_card(turn: Turn, item: BranchTurn | None = None) -> str:
    """The turn's card; `item` when the caller knows the turn's siblings already."""
    return render_to_string("chats/_turn.html", {"item": item or branch_turn(turn=turn)})


def turn_card_frames(
    turn: Turn,
    kinds: tuple[CardKind, ...],
    item: BranchTurn | None = None,
) -> list[TurnCardFrame]:
    """Frames that carry the turn's card as the page would render it now, rendered once
    whatever the number of kinds (database thread)."""
    html = render_turn_card(turn, item)
    return [
        turn_card(
            kind,
            turn_id=turn.pk,
            parent_id=turn.parent_id,
            status=turn.status,
            html=html,
            chat_title=turn.chat.title,
        )
        for kind in kinds
    ]


def turn_card_frame(kind: CardKind, turn: Turn, item: BranchTurn | None = None) -> TurnCardFrame:
    return turn_card_frames(turn, (kind,), item)[0]


async def turn_frame(kind: CardKind, turn: Turn) -> TurnCardFrame:
    return await database_sync_to_async(turn_card_frame)(kind, turn)


async def publish_turn_cards(
    kind: CardKind, cards: list[tuple[Turn, TurnCardFrame | None]]
) -> None:
    """Announce these turns' cards to their chats' pages in one publish (one round trip to
    Redis). A card not rendered yet is rendered now; one that cannot be is left out, and its
    pages show the turn when they next sync."""
    frames = []
    for turn, frame in cards:
        if frame is None:
            try:
                frame = await turn_frame(kind, turn)
            except Exception:
                logger.exception("Rendering the card of turn %s failed", turn.pk)
                continue
        frames.append((turn.chat_id, frame))
    if frames:
        await publish_to_chats(frames)


async def publish_turn_started(turn: Turn) -> None:
    await publish_turn_cards("turn.started", [(turn, None)])


class RunRegistry:
    """The runs of this process: keeps their tasks alive, renews their leases, sweeps orphans."""

    def __init__(self) -> None:
        self.runs: dict[int, TurnRun] = {}
        self._heartbeat: asyncio.Task | None = None

    async def start(
        self,
        turn: Turn,
        request: AgentRequest,
        *,
        run_class: type[TurnRun] | None = None,
        siblings: list[int] | None = None,
    ) -> TurnRun:
        run = (run_class or TurnRun)(turn, request)
        run.siblings = siblings
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
            except Exception:
                logger.exception("Renewing the leases of running turns failed")
            try:
                await sweep_orphans()
            except Exception:
                logger.exception("Sweeping orphaned turns failed")
            await asyncio.sleep(settings.TURN_HEARTBEAT_SECONDS)

    async def shutdown(self) -> None:
        """Cancel this process's runs; each records itself interrupted before it ends."""
        runs = list(self.runs.values())
        for run in runs:
            if run.task is not None and not run.finishing:  # a finishing one is storing itself
                run.task.cancel()
        await asyncio.gather(*(run.task for run in runs if run.task), return_exceptions=True)
        # A run cancelled before it began (asked for a moment before) recorded nothing: its
        # turn must not stay "streaming" until another process sweeps it.
        for run in runs:
            if not run.began:
                await run.end_unbegun()
                self.runs.pop(run.turn_id, None)
        if self._heartbeat:
            self._heartbeat.cancel()


async def sweep_orphans() -> None:
    turns = await database_sync_to_async(turn_interrupt_orphans)()
    for turn in turns:
        await _publish_finished_safely(turn)
    start_source_checks(turn.pk for turn in turns if getattr(turn, "pages_to_check", False))
    # Every way a sweep ends a turn (its partial answer stored, or failed) is indexed here: the
    # search queue's catch-up passes leave chats alone while they stream.
    get_search_index_queue().add_many([turn.chat_id for turn in turns])


async def _fail_unfinishable(turn_id: int, error: str) -> Turn | None:
    """Mark a turn whose answer could not be stored failed, with the fewest fields possible."""
    try:
        return await database_sync_to_async(turn_fail_unsaved)(turn_id=turn_id, error=error)
    except Exception:  # the database itself is away: the orphan sweep finishes it later
        logger.exception("Marking turn %s failed did not work either", turn_id)
        return None


@dataclass(frozen=True)
class Finish:
    """How a run ended, and its turn's siblings if the run knew them (for its final card)."""

    end: TurnEnd
    siblings: list[int] | None = None


# The stored turn (None: it was finished already) and its final card (None: not rendered).
Stored = tuple[Turn | None, TurnCardFrame | None]


def _store_finishes(finishes: list[Finish]) -> list[Stored]:
    """Store the ended turns in one transaction, then render their cards (database thread)."""
    turns = turn_finish_many([finish.end for finish in finishes])
    try:  # the cards list each turn's tool calls, the frames its chat's title: one query each
        # for the batch, not one per card
        prefetch_related_objects(
            [turn for turn in turns if turn is not None], "audit_traces", "chat"
        )
    except Exception:  # stored all the same: each card queries its own
        logger.exception("Loading the tool calls of %d finished turns failed", len(turns))
    return [_stored(turn, finish) for turn, finish in zip(turns, finishes, strict=True)]


def _stored(turn: Turn | None, finish: Finish) -> Stored:
    return (turn, None) if turn is None else (turn, _final_card(turn, finish))


def _final_card(turn: Turn, finish: Finish) -> TurnCardFrame | None:
    siblings = finish.siblings
    item = None
    if siblings and turn.pk in siblings:
        item = BranchTurn(turn, siblings.index(turn.pk) + 1, siblings)
    return rendered_or_none(turn, "turn.finished", item)


async def _announce_finished(batch: list[Stored]) -> None:
    """Send the stored turns' final cards to their chats' pages in one publish; queue their
    chats for search."""
    stored = [(turn, frame) for turn, frame in batch if turn is not None]
    try:
        await publish_turn_cards("turn.finished", stored)
    except Exception:  # stored all the same: pages that sync see them
        logger.exception("Announcing the end of %d turns failed", len(stored))
    for turn, _ in stored:
        get_search_index_queue().add(turn.chat_id)
    start_source_checks(turn.pk for turn, _ in stored if getattr(turn, "pages_to_check", False))


# This event loop's ending turns: answers that end together are stored in one trip (and one
# transaction); when the database refuses it, each is stored alone.
get_finish_batches = PerLoop(
    lambda: DatabaseBatches(_store_finishes, name="finish", then=_announce_finished)
)


def rendered_or_none(turn: Turn, kind: CardKind, item: BranchTurn | None) -> TurnCardFrame | None:
    """The turn's card frame, or None if rendering it failed (database thread)."""
    try:
        return turn_card_frame(kind, turn, item)
    except Exception:  # the turn is stored: publishing renders the card again, or says why not
        logger.exception("Rendering the card of turn %s failed", turn.pk)
        return None


async def _publish_finished_safely(turn: Turn) -> None:
    try:
        await publish_turn_cards("turn.finished", [(turn, None)])
    except Exception:  # stored all the same: pages that sync see it
        logger.exception("Announcing the end of turn %s failed", turn.pk)


async def request_stop(turn_id: int) -> None:
    """Ask the run of `turn_id`, in whichever process it lives, to stop."""
    await publish(control_group(turn_id), turn_stop())


get_registry = PerLoop(RunRegistry)  # this event loop's runs
