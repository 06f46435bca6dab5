"""Start a page's ask: a burst of asks starts together (chats/loop/batches.py), each then runs.

Every ask needs the database: check the asker's session, start the turn (locks, limits, the
branch), render its card. The asks waiting together go in one trip and one transaction
(`services.turn_start_many`); then each started turn is announced to its chat's pages and its
run begins, even if the page that asked has gone meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.sessions.backends.base import SessionBase

from chats.errors import ErrorCode, TurnStartError
from chats.live.protocol import TurnCardFrame
from chats.loop.batches import DatabaseBatches
from chats.loop.per_loop import PerLoop
from chats.run.cards import publish_turn_cards, rendered_or_none
from chats.run.registry import get_registry
from chats.services import StartedTurn, TurnAsk, turn_start_many

logger = logging.getLogger(__name__)

SHUTTING_DOWN = "The server is restarting. Ask again in a moment."
ANNOUNCE_TIMEOUT = 5.0  # seconds: a Redis that does not answer must not keep the runs waiting


@dataclass(frozen=True)
class Asked:
    ask: TurnAsk
    session_is_alive: Callable[[], bool]  # run on the database thread


@dataclass(frozen=True)
class Started:
    turn: StartedTurn
    card: TurnCardFrame | None  # None: rendering it failed; publishing renders it again


async def ask_start(ask: TurnAsk, session_is_alive: Callable[[], bool]) -> Started | None:
    """Start the ask's turn: create it, announce its card to the chat's pages, run it.

    Returns None when the asker's session has ended; raises TurnStartError when the ask is
    refused (a limit, a parent not in the chat, a server shutting down).
    """
    batches = get_ask_batches()
    if batches.closed:
        raise TurnStartError(SHUTTING_DOWN, ErrorCode.SERVER_ERROR)
    return await batches.submit(Asked(ask, session_is_alive))


def session_check(session: SessionBase | None) -> Callable[[], bool]:
    """The session check of an ask from a signed-in page (a websocket, a form), for
    `ask_start`: False once the session it was made in has ended (a logout, in any tab), so an
    ask that raced a logout starts nothing. Without a session (tests that set the user
    directly) there is nothing to check. The check runs on the database thread."""

    def is_alive() -> bool:
        if session is None:
            return True
        key = session.session_key
        return bool(key) and session.exists(key)

    return is_alive


def _start_asks(batch: list[Asked]) -> list[Started | TurnStartError | Exception | None]:
    """Check each session, start the turns of the live ones, render their cards (database
    thread). A refused ask is its own outcome; a batch the database refuses raises."""
    outcomes: list[Started | TurnStartError | Exception | None] = [None] * len(batch)
    live = []
    for index, asked in enumerate(batch):
        try:
            if asked.session_is_alive():
                live.append(index)
        except Exception as error:
            outcomes[index] = error
    started = turn_start_many([batch[index].ask for index in live])
    for index, outcome in zip(live, started, strict=True):
        outcomes[index] = outcome if isinstance(outcome, TurnStartError) else _with_card(outcome)
    return outcomes


def _with_card(started: StartedTurn) -> Started:
    turn = started.turn
    return Started(started, rendered_or_none(turn, "turn.started", started.card_item))


async def _announce_and_run(batch: list[Started | None]) -> None:
    """Announce the batch's started turns to their chats' pages in one publish, then run them."""
    started = [s for s in batch if s is not None]  # None: that asker's session had ended
    try:
        async with asyncio.timeout(ANNOUNCE_TIMEOUT):
            await publish_turn_cards("turn.started", [(s.turn.turn, s.card) for s in started])
    except Exception:  # the pages' next sync shows the turns: the answers matter more
        logger.exception("Announcing %d started turns failed", len(started))
    registry = get_registry()
    for s in started:
        await registry.start(s.turn.turn, s.turn.request, siblings=s.turn.siblings)


# This event loop's asks.
get_ask_batches = PerLoop(lambda: DatabaseBatches(_start_asks, name="ask", then=_announce_and_run))
