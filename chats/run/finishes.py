"""Storing finished turns: runs that end together are stored in one transaction, then their
final cards are announced and their chats queued for search; turns whose process died are
finished as interrupted (`finish_orphans`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.db.models import prefetch_related_objects

from chats.agent.transcript import Transcript
from chats.library.search import chat_search_index_update, get_search_index_queue
from chats.live.protocol import TurnCardFrame, publish_to_chats, turn_checked
from chats.loop.batches import DatabaseBatches
from chats.loop.per_loop import PerLoop
from chats.models import Turn
from chats.run.cards import publish_turn_cards, rendered_or_none
from chats.run.rendering import turn_end
from chats.selectors import BranchTurn, turn_logged_events, turn_orphan_ids
from chats.services import TurnEnd, turn_fail_unsaved, turn_finish_many
from chats.verify.check import PagesToCheck, start_source_checks

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finish:
    """How a run ended, and its turn's siblings if the run knew them (for its final card)."""

    end: TurnEnd
    siblings: list[int] | None = None


@dataclass(frozen=True)
class Stored:
    """A finish as stored: the turn (None: it was finished already), its final card (None: not
    rendered) and its pages to read (None: it cites none without a passage)."""

    turn: Turn | None
    card: TurnCardFrame | None = None
    to_check: PagesToCheck | None = None


async def fail_unfinishable(turn_id: int, error: str) -> Turn | None:
    """Mark a turn whose answer could not be stored failed, with the fewest fields possible."""
    try:
        return await database_sync_to_async(turn_fail_unsaved)(turn_id=turn_id, error=error)
    except Exception:  # the database itself is away: the orphan sweep finishes it later
        logger.exception("Marking turn %s failed did not work either", turn_id)
        return None


def finish_turn(
    *,
    turn_id: int,
    transcript: Transcript,
    status: str,
    error: str = "",
    error_kind: str = "",
    index_for_search: bool = True,
) -> Turn | None:
    """Render the answer and store it with the outcome in one transaction (database thread).

    Returns None when the turn was already finished (by a sweeper that thought its run dead).
    A run indexes its chat for search itself, batched with others, once the page has its answer
    (`index_for_search=False`; chats.library.search.SearchIndexQueue).
    """
    stored = _finish_one(turn_id, transcript, status, error=error, error_kind=error_kind)
    if stored.turn is not None and index_for_search:
        chat_search_index_update(chat_id=stored.turn.chat_id)  # searchable once it is stored
    return stored.turn


def _finish_one(turn_id: int, transcript: Transcript, status: str, **outcome: str) -> Stored:
    """The turn finished and stored as `finish_turn` does, with its pages to read; its card is
    rendered when it is announced."""
    end = turn_end(turn_id, transcript, status, **outcome)
    (turn,) = turn_finish_many([end])
    return Stored(turn, None, _pages_to_check(turn, end))


def finish_orphans() -> list[Stored]:
    """Finish streaming turns whose run stopped renewing its lease; keep their partial answers.

    Each turn on its own: one that cannot be finished is marked failed, and one that cannot
    even be marked is logged and left for the next sweep, never stopping the others. The
    caller indexes the returned turns' chats for search (`registry.sweep_orphans`, batched).
    """
    finished = []
    for turn_id in turn_orphan_ids():
        try:
            stored = _finish_one(
                turn_id,
                Transcript.from_log(turn_logged_events(turn_id=turn_id)),
                Turn.Status.INTERRUPTED,
                error="The server stopped while this answer was being written. Retry to ask again.",
                error_kind=Turn.ErrorKind.SERVER,
            )
        except Exception as error:
            logger.exception("Could not finish orphaned turn %s; marking it failed", turn_id)
            try:
                stored = Stored(
                    turn_fail_unsaved(
                        turn_id=turn_id,
                        error=(
                            "The server stopped while this answer was being written, and what"
                            f" arrived could not be saved ({type(error).__name__})."
                            " Retry to ask again."
                        ),
                    )
                )
            except Exception:
                logger.exception("Could not mark orphaned turn %s failed either", turn_id)
                continue
        if stored.turn is not None:
            logger.warning("Finished orphaned turn %s as %s", turn_id, stored.turn.status)
            finished.append(stored)
    return finished


def store_finishes(finishes: list[Finish]) -> list[Stored]:
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
    if turn is None:
        return Stored(None)
    return Stored(turn, _final_card(turn, finish), _pages_to_check(turn, finish.end))


def _pages_to_check(turn: Turn | None, end: TurnEnd) -> PagesToCheck | None:
    """The stored turn's cited pages to read, with its cited answer as stored (the check reads
    nothing back); None when it cites none without a passage."""
    if turn is None:
        return None
    check = PagesToCheck(turn, end.rendered.cited)
    return check if check.pending else None


def _final_card(turn: Turn, finish: Finish) -> TurnCardFrame | None:
    siblings = finish.siblings
    item = None
    if siblings and turn.pk in siblings:
        item = BranchTurn.among(turn, siblings)
    return rendered_or_none(turn, "turn.finished", item)


async def announce_finished(batch: list[Stored]) -> None:
    """Send the stored turns' final cards to their chats' pages in one publish; queue their
    chats for search."""
    stored = [(item.turn, item.card) for item in batch if item.turn is not None]
    try:
        await publish_turn_cards("turn.finished", stored)
    except Exception:  # stored all the same: pages that sync see them
        logger.exception("Announcing the end of %d turns failed", len(stored))
    for turn, _ in stored:
        get_search_index_queue().add(turn.chat_id)
    start_source_checks(
        [item.to_check for item in batch if item.to_check is not None], publish_turns_checked
    )


async def publish_turns_checked(turns: list[Turn]) -> None:
    """These turns' cited pages were read and stored (chats.verify): their pages get each
    checked answer, in one publish. Only the answer changed, so no card is rendered again."""
    await publish_to_chats(
        [(turn.chat_id, turn_checked(turn.pk, turn.answer_html)) for turn in turns]
    )


# This event loop's ending turns: answers that end together are stored in one trip (and one
# transaction); when the database refuses it, each is stored alone.
get_finish_batches = PerLoop(
    lambda: DatabaseBatches(store_finishes, name="finish", then=announce_finished)
)
