"""A turn's card as its chat's pages show it: rendered once, sent as frames to every page."""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async

from chats.live.fragments import fragments
from chats.live.protocol import CardKind, TurnCardFrame, publish_to_chats, turn_card
from chats.models import Turn
from chats.selectors import BranchTurn, branch_turn

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


async def publish_turn_checked(turn: Turn) -> None:
    """The turn's cited pages were read and stored (chats.verify): its pages get the new card."""
    await publish_turn_cards("turn.checked", [(turn, None)])


def rendered_or_none(turn: Turn, kind: CardKind, item: BranchTurn | None) -> TurnCardFrame | None:
    """The turn's card frame, or None if rendering it failed (database thread)."""
    try:
        return turn_card_frame(kind, turn, item)
    except Exception:  # the turn is stored: publishing renders the card again, or says why not
        logger.exception("Rendering the card of turn %s failed", turn.pk)
        return None
