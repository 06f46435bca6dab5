"""Re-run: ask a finished turn's question again, as asked, as a new version of that turn.

The new turn is a sibling of the old one (the same parent, as "Edit" makes), asked with the
same research effort and the options the old turn was asked with; the chat's agent is the
chat's. The page's "Re-run" button and a watch's scheduled run both start it this way.
"""

from __future__ import annotations

from chats.agent.options import QuestionOptions
from chats.errors import ErrorCode
from chats.models import Chat, Turn
from chats.services import TurnAsk, TurnStartError


def rerun_ask(*, chat: Chat, turn_id: int) -> TurnAsk:
    """Return the ask that re-runs `turn_id` of `chat`, or raise TurnStartError saying why not."""
    turn = Turn.objects.filter(pk=turn_id, chat_id=chat.pk).first()
    if turn is None:
        raise TurnStartError("That turn is not in this chat.", ErrorCode.NOT_FOUND)
    if not turn.is_finished:
        raise TurnStartError("This answer is still being written.", ErrorCode.TURN_IN_PROGRESS)
    if turn.workflow:
        raise TurnStartError("A workflow's answer is run again from Workflows.")
    # Turns asked before options were recorded per turn are re-run with the chat's options.
    stored = turn.options if turn.options is not None else chat.options
    return TurnAsk(
        chat=chat,
        question=turn.question,
        research_effort=turn.research_effort,
        parent_turn_id=turn.parent_id,
        options=QuestionOptions.from_stored(stored),
        save_options=False,
    )


def can_rerun(turn: Turn) -> bool:
    return turn.is_finished and not turn.workflow
