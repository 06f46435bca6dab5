"""Two finished answers a watch compares: the first version, and one whose figures and sources
moved."""

from __future__ import annotations

from chats.agent.providers.bigdata import event_from_message
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn
from chats.run.finishes import finish_turn
from chats.services import turn_start
from demo_agent.scripted import cited_answer_stream

FIRST = [("Revenue rose 12% to $4.1 billion.", "Reuters"), ("Demand was strong.", "Bloomberg")]
SECOND = [("Revenue rose 14% to $4.2 billion.", "Reuters"), ("Demand was strong.", "Nikkei")]


def answered_turn(chat: Chat, claims=FIRST) -> Turn:
    """A finished turn as a run stores it, from the scripted stand-in's own stream (read as
    the Research Agent's adapter reads it)."""
    started = turn_start(chat=chat, question="How did revenue do?", research_effort="standard")
    transcript = Transcript()
    for message in cited_answer_stream(claims):
        transcript.apply(event_from_message(message))
    return finish_turn(turn_id=started.turn.pk, transcript=transcript, status=Turn.Status.COMPLETE)
