"""A turn's card as its chat's pages show it: rendered once, sent as frames to every page."""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from django.db.models import prefetch_related_objects

from chats.live.fragments import fragments
from chats.live.protocol import CardKind, TurnCardFrame, publish_to_chats, turn_card
from chats.models import Turn
from chats.selectors import BranchTurn, branch_turn, branch_turns

logger = logging.getLogger(__name__)


def render_turn_card(turn: Turn, item: BranchTurn | None = None) -> str:
    """The turn's card; `item` when the caller knows the turn's siblings already."""
    return fragments().turn_card(item or branch_turn(turn=turn))


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


def rendered_cards(kind: CardKind, turns: list[Turn]) -> list[TurnCardFrame | None]:
    """Each turn's card frame, their siblings, tool calls and chats read for all of them in a
    query each (what a finish loaded already is not read again); None for a card that could not
    be rendered (database thread)."""
    try:
        prefetch_related_objects(turns, "audit_traces", "chat")
        items: list[BranchTurn | None] = list(branch_turns(turns=turns))
    except Exception:  # each card reads its own
        logger.exception("Reading the versions of %d turns failed", len(turns))
        items = [None] * len(turns)
    return [rendered_or_none(turn, kind, item) for turn, item in zip(turns, items, strict=True)]


async def publish_turn_cards(
    kind: CardKind, cards: list[tuple[Turn, TurnCardFrame | None]]
) -> None:
    """Announce these turns' cards to their chats' pages in one publish (one round trip to
    Redis). The cards not rendered yet are rendered now, together; one that cannot be is left
    out, and its pages show the turn when they next sync."""
    missing = [turn for turn, frame in cards if frame is None]
    rendered = {}
    if missing:
        try:
            frames = await database_sync_to_async(rendered_cards)(kind, missing)
        except Exception:  # the database thread is away: the pages sync
            logger.exception("Rendering the cards of %d turns failed", len(missing))
            frames = [None] * len(missing)
        rendered = {id(turn): frame for turn, frame in zip(missing, frames, strict=True)}
    published = [
        (turn.chat_id, frame)
        for turn, given in cards
        if (frame := given or rendered.get(id(turn))) is not None
    ]
    if published:
        await publish_to_chats(published)


async def publish_turn_started(turn: Turn) -> None:
    await publish_turn_cards("turn.started", [(turn, None)])


def rendered_or_none(turn: Turn, kind: CardKind, item: BranchTurn | None) -> TurnCardFrame | None:
    """The turn's card frame, or None if rendering it failed (database thread)."""
    try:
        return turn_card_frame(kind, turn, item)
    except Exception:  # the turn is stored: publishing renders the card again, or says why not
        logger.exception("Rendering the card of turn %s failed", turn.pk)
        return None
