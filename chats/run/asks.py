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

from django.contrib.sessions.backends import db as database_sessions
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


@dataclass(frozen=True)
class SessionCheck:
    """The session check of an ask from a signed-in page (a websocket, a form), for
    `ask_start`: False once the session it was made in has ended (a logout, in any tab), so an
    ask that raced a logout starts nothing. Without a session (tests that set the user
    directly) there is nothing to check. The check runs on the database thread; the checks of
    asks started together whose sessions the database keeps are one query (`_sessions_alive`)."""

    session: SessionBase | None

    def __call__(self) -> bool:
        if self.session is None:
            return True
        key = self.session.session_key
        return bool(key) and self.session.exists(key)

    @property
    def stored_session(self) -> database_sessions.SessionStore | None:
        """The session, when it is kept in the database (its `exists` is a query by key). A
        websocket's is channels' LazyObject, whose `__class__` is the store's."""
        session = self.session
        return session if session.__class__ is database_sessions.SessionStore else None


def _start_asks(batch: list[Asked]) -> list[Started | TurnStartError | Exception | None]:
    """Check each session, start the turns of the live ones, render their cards (database
    thread). A refused ask is its own outcome; a batch the database refuses raises."""
    outcomes: list[Started | TurnStartError | Exception | None] = [None] * len(batch)
    live = []
    for index, alive in enumerate(_sessions_alive(batch)):
        if isinstance(alive, Exception):
            outcomes[index] = alive
        elif alive:
            live.append(index)
    started = turn_start_many([batch[index].ask for index in live])
    for index, outcome in zip(live, started, strict=True):
        outcomes[index] = outcome if isinstance(outcome, TurnStartError) else _with_card(outcome)
    return outcomes


def _sessions_alive(batch: list[Asked]) -> list[bool | Exception]:
    """Whether each asker may still ask. Sessions kept in the database are looked up in one
    query for the batch (a query each cost 125 µs of the database thread an ask, and on
    PostgreSQL a round trip); any other check runs alone, its failure its own ask's."""
    stored = {
        index: session
        for index, asked in enumerate(batch)
        if isinstance(asked.session_is_alive, SessionCheck)
        and (session := asked.session_is_alive.stored_session) is not None
    }
    found: set[str] = set()
    if stored:
        keys = [session.session_key for session in stored.values() if session.session_key]
        model = next(iter(stored.values())).model
        found = set(
            model.objects.filter(session_key__in=keys).values_list("session_key", flat=True)
        )
    alive: list[bool | Exception] = []
    for index, asked in enumerate(batch):
        if index in stored:
            alive.append(stored[index].session_key in found)
            continue
        try:
            alive.append(bool(asked.session_is_alive()))
        except Exception as error:
            alive.append(error)
    return alive


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
