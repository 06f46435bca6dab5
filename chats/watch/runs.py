"""Running a claimed watch: re-run its newest version, wait for the answer, compare, record.

The run is an ordinary turn (`chats/run/asks.py`): the same limits as a page's ask (one
streaming turn per chat, AGENT_MAX_CONCURRENT_TURNS per user, the monthly usage limit), its
events logged and relayed to any page open on the chat. A run the usage limit refuses pauses
its watch, with the reason shown under "Changes". Inside the server the runs go on the
server's event loop (the worker thread hands them over); in `run_watches` or a separate
`db_worker` they get a loop of their own, shut down like the server's when they are done.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from chats.answer.compare import compare_turns
from chats.live.protocol import ErrorCode
from chats.models import Turn
from chats.run.asks import ask_start
from chats.run.lifespan import shut_down
from chats.run.registry import run_ended
from chats.run.rerun import rerun_ask
from chats.selectors import turn_versions
from chats.services import TurnAsk, TurnStartError
from chats.watch.models import Watch, WatchRun
from chats.watch.notify import tell_analyst
from chats.watch.services import watch_pause, watch_run_begin, watch_run_end
from chats.webhooks.services import webhooks_watch_changed

logger = logging.getLogger(__name__)

LIMITS = frozenset({ErrorCode.TOO_MANY_TURNS, ErrorCode.TURN_IN_PROGRESS})

# The server's event loop while a worker runs inside the server (chats/watch/worker.py).
server_loop: asyncio.AbstractEventLoop | None = None


@dataclass(frozen=True)
class Outcome:
    state: str  # the run's WatchRun state
    retry_soon: bool = False  # a limit on answers being written refused it: try again soon


def run_claimed_watches(watches: list[Watch]) -> list[Outcome]:
    """Run watches this caller claimed, and return each one's outcome.

    Called from synchronous code: a task worker's thread, or the `run_watches` command.
    """
    loop = server_loop
    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(_run_all(watches), loop).result()
    return asyncio.run(_run_standalone(watches))


async def _run_standalone(watches: list[Watch]) -> list[Outcome]:
    try:
        return await _run_all(watches)
    finally:  # every event logged and relayed, every connection closed, as a server stops
        await shut_down()


async def _run_all(watches: list[Watch]) -> list[Outcome]:
    outcomes = await asyncio.gather(*(run_watch(w) for w in watches), return_exceptions=True)
    for watch, outcome in zip(watches, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            logger.error("Watch %s failed", watch.pk, exc_info=outcome)
    failed = Outcome(WatchRun.State.FAILED)
    return [o if isinstance(o, Outcome) else failed for o in outcomes]


@dataclass(frozen=True)
class _Begun:
    run: WatchRun
    ask: TurnAsk | None
    error: str = ""


async def run_watch(watch: Watch) -> Outcome:
    """Re-run the watch's newest finished version and record how it compares (claimed)."""
    begun = await database_sync_to_async(_begin)(watch)
    if begun.ask is None:
        return Outcome(await _end(begun.run, WatchRun.State.FAILED, error=begun.error))
    try:
        return await _rerun(watch, begun.run, begun.ask)
    except Exception:  # recorded, so that the watch is released and the failure counts
        logger.exception("Watch %s failed", watch.pk)
        error = "Something went wrong on our side while re-running this question."
        return Outcome(await _end(begun.run, WatchRun.State.FAILED, error=error))


async def _rerun(watch: Watch, record: WatchRun, ask: TurnAsk) -> Outcome:
    owner_id = watch.owner_id
    try:
        started = await ask_start(ask, lambda: _owner_is_active(owner_id))
    except TurnStartError as refused:
        if refused.code == ErrorCode.USAGE_LIMIT:  # paused, saying why, until resumed
            await database_sync_to_async(watch_pause)(watch=watch, reason=str(refused))
            return Outcome(await _end(record, WatchRun.State.SKIPPED, error=str(refused)))
        if refused.code in LIMITS:
            state = await _end(record, WatchRun.State.SKIPPED, error=str(refused))
            return Outcome(state, retry_soon=True)
        return Outcome(await _end(record, WatchRun.State.FAILED, error=str(refused)))
    if started is None:
        error = "The account is not active."
        return Outcome(await _end(record, WatchRun.State.FAILED, error=error))
    turn_id = started.turn.turn.pk
    await run_ended(turn_id)
    return Outcome(await database_sync_to_async(_compare_and_record)(record, turn_id))


def _begin(watch: Watch) -> _Begun:
    """The newest finished version to re-run and compare with, and the run's record."""
    answered = turn_versions(turns=[watch.turn], statuses=[Turn.Status.COMPLETE])[watch.turn_id]
    previous = answered[-1] if answered else None
    run = watch_run_begin(watch=watch, previous=previous)
    if previous is None:
        return _Begun(run, None, "No finished version of this question is left to re-run.")
    try:
        return _Begun(run, rerun_ask(chat=watch.chat, turn_id=previous.pk))
    except TurnStartError as refused:
        return _Begun(run, None, str(refused))


def _owner_is_active(owner_id: int) -> bool:
    return get_user_model().objects.filter(pk=owner_id, is_active=True).exists()


def _compare_and_record(run: WatchRun, turn_id: int) -> str:
    turn = Turn.objects.get(pk=turn_id)
    if turn.status != Turn.Status.COMPLETE or run.previous_turn is None:
        error = turn.error or f"The answer ended {turn.get_status_display()}."
        return _record(run, WatchRun.State.FAILED, turn=turn, error=error)
    comparison = compare_turns(before=run.previous_turn, after=turn)
    state = WatchRun.State.CHANGED if comparison.has_changes else WatchRun.State.UNCHANGED
    return _record(
        run,
        state,
        turn=turn,
        comparison=comparison.to_dict(),
        summary=comparison.summary,
        figures=comparison.figures_named(),
    )


async def _end(run: WatchRun, state: str, *, error: str = "") -> str:
    return await database_sync_to_async(_record)(run, state, error=error)


def _record(run: WatchRun, state: str, **fields) -> str:
    ended = watch_run_end(run=run, state=state, **fields)
    try:
        tell_analyst(run=ended)
    except Exception:  # the change is recorded and shown in the app all the same
        logger.exception("Telling the analyst about watch run %s failed", ended.pk)
    if state == WatchRun.State.CHANGED:
        _send_watch_changed(ended)
    return state


def _send_watch_changed(run: WatchRun) -> None:
    """The change to the analyst's `watch.changed` webhook endpoints, if they have any."""
    watch = run.watch
    try:
        webhooks_watch_changed(
            owner_id=watch.owner_id,
            watch_id=watch.pk,
            chat_id=watch.chat_id,
            question=watch.turn.question,
            turn_id=run.turn_id,
            previous_turn_id=run.previous_turn_id,
            comparison=run.comparison,
        )
    except Exception:  # recorded and shown in the app all the same
        logger.exception("Recording the webhooks of watch run %s failed", run.pk)
