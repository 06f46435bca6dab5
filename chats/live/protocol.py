"""The websocket protocol between the chat page and the server: every frame, both directions.

Browser → server: `ask`, `rerun`, `stop`, `sync`, validated by `parse_client_frame`.
Server → browser: `turn.started`, `turn.events`, `turn.notice`, `turn.finished`, `turn.checked`
(a finished turn's answer again, once its cited pages are read: chats/verify/) and `error`,
each built by one function here and described by a TypedDict schema that
`tests/chats/live/test_protocol.py` checks every built frame against.
Between server processes: `turn.stop` (naming its turn) on the group of every process that
runs turns, `session.end` on a user's group, over the channel layer (`publish`).

Frames for a chat's pages go through `publish_to_chats` (Zulip's `send_event`): each is encoded
to JSON text here, once, and the relay (`chats/live/relay/`) carries the text to every page open
on the chat, which forwards it unchanged. No other module knows how a frame is spelled or how it
travels. Only code that has committed what its frames say calls it (the rule is in
`chats/live/__init__.py`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

from channels.layers import get_channel_layer
from django.conf import settings

from chats.agent.events import (
    ActionEvent,
    AgentEvent,
    AnswerEvent,
    ChartEvent,
    CompleteEvent,
    ErrorEvent,
    LlmRetryEvent,
    PlanningEvent,
    SkippedEvent,
    ThinkingEvent,
    ToolErrorEvent,
)
from chats.agent.logged_events import logged_event
from chats.agent.options import OptionsError, QuestionOptions, parse_options
from chats.answer import display
from chats.answer.charts import chart_for_turn
from chats.errors import ErrorCode, FrameError
from chats.live import relay
from chats.live.compact_json import compact_json
from chats.live.fragments import fragments
from chats.live.relay import RelayFrame
from chats.models import LEAF

# --- Groups ----------------------------------------------------------------------------------


def stop_requests_group() -> str:
    """Every process that runs turns, one member each: a stop request names its turn, and the
    process running it stops it. One group for all, not one a turn: joining and leaving a
    group of its own cost each turn ~1 ms of CPU on Redis (docs/PERFORMANCE.md, "Stop requests
    reach a process, not a turn")."""
    return "turn.stop-requests"


def user_group(user_id: int) -> str:
    """Every socket of one user: closed together when the user logs out."""
    return f"user.{user_id}"


async def publish(group: str, message: dict[str, Any]) -> None:
    """Send `message` to every member of `group`, in any process (stop requests, logouts)."""
    await get_channel_layer().group_send(group, message)


async def publish_to_chats(
    frames: list[tuple[int, ChatFrame]], *, received_at: float = 0.0
) -> None:
    """Send each (chat id, frame) to every page open on that chat, in any process, in order.
    `received_at`: when the frames' oldest agent event was received (time.time()), if known."""
    await relay.publish([(chat_id, encode(frame, received_at)) for chat_id, frame in frames])


async def publish_to_chat(chat_id: int, frame: ChatFrame) -> None:
    await publish_to_chats([(chat_id, frame)])


def encode(frame: ChatFrame, received_at: float = 0.0) -> RelayFrame:
    """The frame as the page receives it, once for every page; seqs kept beside it for order."""
    text = compact_json(frame)
    events = frame.get("events")
    first, last = (events[0]["seq"], events[-1]["seq"]) if events else (0, 0)
    return RelayFrame(frame["type"], frame["turn_id"], text, first, last, received_at)


def event_stream_text(frame: RelayFrame) -> str:
    """A frame as the API's event stream sends it (chats/api/stream.py), in one piece.

    `turn.events`: each event it carries is one server-sent event, `id:` its seq, `event:` its
    type, `data:` its JSON as the page receives it, cut from the frame's text rather than
    encoded again. Any other frame (`turn.finished`, `turn.notice`) is one server-sent event
    without an id: `event:` its type, `data:` its text.

    `encode` writes a frame of events as `{"type":"turn.events","turn_id":N,"events":[...]}`,
    each event an object whose first keys are `seq` and `type` (`event_view` builds them first),
    and no other object in it has a `seq` key; inside a JSON string a `"` is always escaped, so
    `,{"seq":` occurs only where the next event begins. JSON escapes line breaks too: each
    event's text is one `data:` line.
    """
    text = frame.text
    if frame.kind != "turn.events":
        return f"event: {frame.kind}\ndata: {text}\n\n"
    if not frame.last_seq:
        return ""  # no events
    events = text[text.index("[") + 8 : -2]  # past `[{"seq":`, before `]}`
    if frame.first_seq == frame.last_seq:  # one event: the most common frame
        comma = events.index(",")  # past its seq's digits
        end = events.index('"', comma + 9)  # past `,"type":"`
        name = events[comma + 9 : end]
        if "\\" in name:
            name = _escaped_type(events, comma)
        return f'id: {events[:comma]}\nevent: {name}\ndata: {{"seq":{events}\n\n'
    messages = []
    for event in events.split(_NEXT_EVENT):  # each `N,"type":"T",...}`
        comma = event.index(",")
        end = event.index('"', comma + 9)
        name = event[comma + 9 : end]
        if "\\" in name:
            name = _escaped_type(event, comma)
        messages.append(f'id: {event[:comma]}\nevent: {name}\ndata: {{"seq":{event}\n\n')
    return "".join(messages)


_NEXT_EVENT = ',{"seq":'
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _escaped_type(event: str, comma: int) -> str:
    """An event's type that JSON had to escape (no agent of the site's sends one), as JSON
    spells it: whole, and still one line."""
    return _JSON_STRING.match(event, comma + 8).group(1)


# --- Browser → server ------------------------------------------------------------------------

EFFORTS = ("lite", "standard")
MAX_SYNC_CURSORS = 200


@dataclass(frozen=True)
class Ask:
    message: str
    research_effort: str
    parent_turn_id: int | str | None  # LEAF, None (the start of the chat) or a turn id
    restart: bool
    options: QuestionOptions | None = None  # None: the chat's stored options


@dataclass(frozen=True)
class Rerun:
    turn_id: int  # asked again as it was asked, as a new version of that turn


@dataclass(frozen=True)
class Stop:
    turn_id: int


@dataclass(frozen=True)
class Sync:
    cursors: dict[int, int]  # turn id -> the last seq the page has
    newest_turn_id: int


ClientFrame = Ask | Rerun | Stop | Sync


def decode_client_frame(text_data: str | None, bytes_data: bytes | None = None) -> ClientFrame:
    """Return the typed frame of one websocket message, or raise FrameError."""
    if text_data is None:
        raise FrameError("Frames must be JSON text.")
    if len(text_data.encode("utf-8", "surrogatepass")) > settings.WEBSOCKET_MAX_FRAME_BYTES:
        raise FrameError(f"Frames are limited to {settings.WEBSOCKET_MAX_FRAME_BYTES} bytes.")
    try:
        data = json.loads(text_data)
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise FrameError("Frames must be JSON.") from error
    return parse_client_frame(data)


def parse_client_frame(data: Any) -> ClientFrame:
    """Return the typed frame, or raise FrameError saying what is wrong with it."""
    if not isinstance(data, dict):
        raise FrameError("A frame must be a JSON object.")
    kind = data.get("type")
    if kind == "ask":
        return _parse_ask(data)
    if kind in ("stop", "rerun"):
        turn_id = data.get("turn_id")
        if not _is_id(turn_id):
            raise FrameError(f"{kind} needs a turn_id.")
        return Stop(turn_id=turn_id) if kind == "stop" else Rerun(turn_id=turn_id)
    if kind == "sync":
        return _parse_sync(data)
    raise FrameError("Unknown frame type.")


def _parse_ask(data: dict[str, Any]) -> Ask:
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise FrameError("Write a question first.")
    if len(message) > settings.MESSAGE_MAX_CHARS:
        raise FrameError(f"Questions are limited to {settings.MESSAGE_MAX_CHARS} characters.")
    if not _is_storable_text(message):
        # JSON may escape what no database column stores (a lone surrogate, NUL).
        raise FrameError("The question contains characters that cannot be sent.")
    effort = data.get("research_effort", "standard")
    if effort not in EFFORTS:
        raise FrameError("research_effort must be 'lite' or 'standard'.")
    parent = data.get("parent_turn_id", LEAF)
    if parent is not None and parent != LEAF and not _is_id(parent):
        raise FrameError("parent_turn_id must be a turn id, null or 'leaf'.")
    restart = data.get("restart", False)
    if not isinstance(restart, bool):
        raise FrameError("restart must be true or false.")
    options = None
    if "options" in data:
        try:
            options = parse_options(data["options"])
        except OptionsError as error:
            raise FrameError(str(error)) from error
    return Ask(
        message=message,
        research_effort=effort,
        parent_turn_id=parent,
        restart=restart,
        options=options,
    )


def _parse_sync(data: dict[str, Any]) -> Sync:
    cursors = data.get("cursors", {})
    newest = data.get("newest_turn_id", 0)
    if not isinstance(cursors, dict) or len(cursors) > MAX_SYNC_CURSORS:
        raise FrameError(f"cursors must be an object of at most {MAX_SYNC_CURSORS} turns.")
    parsed: dict[int, int] = {}
    for key, seq in cursors.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit()) or not _is_count(seq):
            raise FrameError("cursors maps turn ids to sequence numbers.")
        parsed[int(key)] = seq
    if not _is_count(newest):
        raise FrameError("newest_turn_id must be a whole number.")
    return Sync(cursors=parsed, newest_turn_id=newest)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _is_storable_text(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


# --- Server → browser: schemas -----------------------------------------------------------------


class ActivityView(TypedDict):
    text: str
    kind: Literal["action", "quiet"]


class EventView(TypedDict):
    """What the page needs of one agent event; each field says what to do with it."""

    seq: int
    type: str  # the upstream type, for the page's own bookkeeping only
    content: NotRequired[str]  # append to the answer preview
    plan_html: NotRequired[str]  # replace the research plan box
    activity: NotRequired[ActivityView]  # append to the activity list
    status: NotRequired[str]  # replace the live status line
    alert: NotRequired[str]  # show as an error banner in the turn
    chart_html: NotRequired[str]  # append to the turn's charts (charts.js draws it)


# The frames that carry a turn's card.
CardKind = Literal["turn.started", "turn.finished"]


class TurnCardFrame(TypedDict):
    type: CardKind
    turn_id: int
    parent_id: int | None
    status: str
    html: str  # the turn's card as the page renders it now
    # The chat's heading and the browser tab's title as they are now (titled after the first
    # question, or renamed since): the page and its chat list entry show them without a reload.
    chat_title: NotRequired[str]
    page_title: NotRequired[str]


class TurnCheckedFrame(TypedDict):
    """A finished turn's answer again, its claims checked against the pages they cite: the page
    puts it in place of the card's answer; the rest of the card is as `turn.finished` left it."""

    type: Literal["turn.checked"]
    turn_id: int
    answer_html: str


class TurnEventsFrame(TypedDict):
    type: Literal["turn.events"]
    turn_id: int
    events: list[EventView]


class TurnNoticeFrame(TypedDict):
    type: Literal["turn.notice"]
    turn_id: int
    label: str


class ErrorFrame(TypedDict):
    type: Literal["error"]
    code: str  # an ErrorCode
    message: str


class TurnStopMessage(TypedDict):
    """The stop requests' group only, never sent to a browser."""

    type: Literal["turn.stop"]
    turn_id: int


class SessionEndMessage(TypedDict):
    """User group only: the consumer answers it with an error frame and a close."""

    type: Literal["session.end"]


class AccessChangedMessage(TypedDict):
    """User group only: a team or a share the user read chats through is gone; each socket
    checks whether its chat is still readable, and closes if not."""

    type: Literal["access.changed"]


# What a chat's pages are sent.
ChatFrame = TurnCardFrame | TurnCheckedFrame | TurnEventsFrame | TurnNoticeFrame

SERVER_FRAMES: dict[str, type] = {
    "turn.started": TurnCardFrame,
    "turn.finished": TurnCardFrame,
    "turn.checked": TurnCheckedFrame,
    "turn.events": TurnEventsFrame,
    "turn.notice": TurnNoticeFrame,
    "error": ErrorFrame,
}
INTERNAL_MESSAGES: dict[str, type] = {
    "turn.stop": TurnStopMessage,
    "session.end": SessionEndMessage,
    "access.changed": AccessChangedMessage,
}


# --- Server → browser: builders ----------------------------------------------------------------


def turn_card(
    kind: CardKind,
    *,
    turn_id: int,
    parent_id: int | None,
    status: str,
    html: str,
    chat_title: str = "",
) -> TurnCardFrame:
    frame = TurnCardFrame(type=kind, turn_id=turn_id, parent_id=parent_id, status=status, html=html)
    if chat_title:
        frame["chat_title"] = display.chat_heading(chat_title)
        frame["page_title"] = display.page_title(chat_title)
    return frame


def turn_checked(turn_id: int, answer_html: str) -> TurnCheckedFrame:
    return TurnCheckedFrame(type="turn.checked", turn_id=turn_id, answer_html=answer_html)


def turn_events(turn_id: int, events: list[EventView]) -> TurnEventsFrame:
    return TurnEventsFrame(type="turn.events", turn_id=turn_id, events=events)


def turn_notice(turn_id: int, label: str) -> TurnNoticeFrame:
    return TurnNoticeFrame(type="turn.notice", turn_id=turn_id, label=label)


def error(code: ErrorCode, message: str) -> ErrorFrame:
    return ErrorFrame(type="error", code=str(code), message=message)


def turn_stop(turn_id: int) -> TurnStopMessage:
    return TurnStopMessage(type="turn.stop", turn_id=turn_id)


def session_end() -> SessionEndMessage:
    return SessionEndMessage(type="session.end")


def access_changed() -> AccessChangedMessage:
    return AccessChangedMessage(type="access.changed")


def event_view(seq: int, event: AgentEvent) -> EventView:
    """Return what the page needs of one event, live or replayed from the log."""
    view = EventView(seq=seq, type=event.type)
    if isinstance(event, AnswerEvent):
        view["content"] = event.content
        view["status"] = display.WRITING_STATUS
    elif isinstance(event, ThinkingEvent):
        view["status"] = display.THINKING_STATUS
    elif isinstance(event, PlanningEvent):
        view["plan_html"] = fragments().plan(event.title, event.steps)
    elif isinstance(event, ActionEvent):
        label = display.action_label(event.tool_name, event.tool_arguments)
        view["activity"] = ActivityView(text=label, kind="action")
        view["status"] = label
    elif isinstance(event, ToolErrorEvent):
        label = display.tool_error_label(event.tool_name, event.error)
        view["activity"] = ActivityView(text=label, kind="quiet")
    elif isinstance(event, LlmRetryEvent):
        view["activity"] = ActivityView(text=display.llm_retry_label(event.message), kind="quiet")
    elif isinstance(event, SkippedEvent):
        view["activity"] = ActivityView(text=event.notice, kind="quiet")
    elif isinstance(event, ErrorEvent):
        view["alert"] = event.error
    elif isinstance(event, ChartEvent):
        html = event.html  # rendered as it arrived, off the loop (`chats.run.rendering`)
        if html is None:
            html = fragments().charts([chart_for_turn(event)])
        view["chart_html"] = html
    elif isinstance(event, CompleteEvent):
        view["status"] = display.CITING_STATUS
    return view


def stored_event_view(seq: int, data: dict[str, Any]) -> EventView:
    """The same view, for an event read back from the log."""
    event = logged_event(data)
    return event_view(seq, event) if event else EventView(seq=seq, type="UNKNOWN")
