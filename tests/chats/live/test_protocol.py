"""The websocket protocol: every frame the server builds matches its schema; every bad client
frame is refused with a message (as Zulip's event_schema tests check each event type)."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal, NotRequired, Union, get_args, get_origin

import pytest
from channels.layers import get_channel_layer

from chats.agent.providers.bigdata import event_from_message
from chats.errors import ErrorCode, FrameError
from chats.live import protocol
from chats.live.compact_json import compact_json
from chats.live.protocol import (
    Ask,
    Rerun,
    Stop,
    Sync,
    decode_client_frame,
    event_view,
    stored_event_view,
)
from chats.models import LEAF

# --- A checker for the TypedDict schemas -------------------------------------------------------


def schema_problems(value: Any, hint: Any, path: str = "frame") -> list[str]:
    """Return what is wrong with `value` against the type `hint` (empty when it conforms)."""
    if hint is Any:
        return []
    origin = get_origin(hint)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{path} is not an object"]
        hints = typing.get_type_hints(hint, include_extras=True)
        problems = [f"{path} has an unknown field {key!r}" for key in value if key not in hints]
        for key, field_hint in hints.items():
            optional = get_origin(field_hint) is NotRequired
            if optional:
                field_hint = get_args(field_hint)[0]
            if key not in value:
                if not optional:
                    problems.append(f"{path} lacks {key!r}")
                continue
            problems += schema_problems(value[key], field_hint, f"{path}.{key}")
        return problems
    if origin is Literal:
        return [] if value in get_args(hint) else [f"{path} is {value!r}, not {get_args(hint)}"]
    if origin in (Union, types.UnionType):
        options = [schema_problems(value, option, path) for option in get_args(hint)]
        return [] if any(not found for found in options) else options[0]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path} is not a list"]
        (item,) = get_args(hint)
        return [p for i, v in enumerate(value) for p in schema_problems(v, item, f"{path}[{i}]")]
    if hint is type(None):
        return [] if value is None else [f"{path} is not null"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path} is not an int"]
    if hint in (str, bool):
        return [] if isinstance(value, hint) else [f"{path} is not a {hint.__name__}"]
    raise AssertionError(f"the checker does not know {hint!r}")


def assert_server_frame(frame: dict[str, Any]) -> None:
    """Fail unless `frame` is a server → browser frame that matches its schema and is JSON."""
    schema = protocol.SERVER_FRAMES.get(frame.get("type"))
    assert schema is not None, f"unknown server frame type {frame.get('type')!r}"
    assert schema_problems(frame, schema) == []
    assert json.loads(json.dumps(frame)) == frame


def test_the_checker_catches_a_missing_field_an_extra_one_and_a_wrong_type():
    good = protocol.turn_notice(7, "Retrying")
    assert schema_problems(good, protocol.TurnNoticeFrame) == []
    assert schema_problems({"type": "turn.notice", "turn_id": 7}, protocol.TurnNoticeFrame)
    assert schema_problems({**good, "extra": 1}, protocol.TurnNoticeFrame)
    assert schema_problems({**good, "turn_id": True}, protocol.TurnNoticeFrame)
    assert schema_problems({**good, "type": "turn.noticed"}, protocol.TurnNoticeFrame)


# --- Every server frame ----------------------------------------------------------------------

PLANNING = {
    "type": "PLANNING",
    "plan": {
        "title": "Earnings <review>",
        "steps": [
            {"description": "Find the filing", "status": "IN_PROGRESS"},
            {"description": "Read it", "status": "COMPLETED"},
        ],
    },
}
EVERY_EVENT = [
    PLANNING,
    {"type": "THINKING", "content": "hmm"},
    {"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": "NVIDIA margins"}},
    {"type": "ACTION", "tool_name": "earnings_calendar", "tool_arguments": {"ticker": "NVDA"}},
    {"type": "AUDIT", "audit_traces": []},
    {"type": "GROUNDING", "references": []},
    {"type": "ANSWER", "content": "Revenue grew."},
    {"type": "STRUCTURED_OUTPUT", "content": {"a": 1}},
    {"type": "LLM_RETRY", "message": ""},
    {"type": "TOOL_ERROR", "tool_name": "search", "error": "timeout"},
    {"type": "ERROR", "error": "upstream model unavailable"},
    {"type": "COMPLETE", "checkpoint_id": "c", "consumption": []},
    {"type": "CHART", "title": "a type this client does not know"},
]


def views_of_every_event() -> list[protocol.EventView]:
    return [event_view(seq, event_from_message(m)) for seq, m in enumerate(EVERY_EVENT, 1)]


def test_every_server_frame_matches_its_schema():
    built = [
        protocol.turn_card("turn.started", turn_id=1, parent_id=None, status="streaming", html=""),
        protocol.turn_card(
            "turn.started", turn_id=2, parent_id=1, status="streaming", html="<p>", chat_title="T"
        ),
        protocol.turn_card("turn.finished", turn_id=2, parent_id=1, status="complete", html="x"),
        protocol.turn_checked(2, "<p>y</p>"),
        protocol.turn_events(2, views_of_every_event()),
        protocol.turn_events(2, [stored_event_view(1, {"no": "type"})]),
        protocol.turn_notice(2, "Rate limited. Retrying in 2 s."),
        *(protocol.error(code, "why") for code in ErrorCode),
    ]
    assert {frame["type"] for frame in built} == set(protocol.SERVER_FRAMES)
    for frame in built:
        assert_server_frame(frame)


def test_internal_messages_match_their_schemas():
    for message in (protocol.turn_stop(3), protocol.session_end()):
        schema = protocol.INTERNAL_MESSAGES[message["type"]]
        assert schema_problems(message, schema) == []


def test_card_frames_carry_the_chat_title_as_the_page_shows_it():
    frame = protocol.turn_card(
        "turn.started", turn_id=1, parent_id=None, status="streaming", html="", chat_title="Q"
    )
    assert (frame["chat_title"], frame["page_title"]) == ("Q", "Q · ResearchSite")
    # The finished card too: the chat may have been renamed while the answer was written.
    finished = protocol.turn_card(
        "turn.finished", turn_id=1, parent_id=None, status="complete", html="", chat_title="R"
    )
    assert (finished["chat_title"], finished["page_title"]) == ("R", "R · ResearchSite")
    untitled = protocol.turn_card(
        "turn.finished", turn_id=1, parent_id=None, status="complete", html=""
    )
    assert "chat_title" not in untitled


def test_event_views_carry_display_strings_not_rules():
    views = {view["seq"]: view for view in views_of_every_event()}
    plan = views[1]["plan_html"]
    assert "Earnings &lt;review&gt;" in plan  # escaped by the template
    assert 'class="step step-in_progress"' in plan
    assert '<span class="step-status">in progress</span>' in plan
    assert views[2] == {"seq": 2, "type": "THINKING", "status": "Thinking…"}
    assert views[3]["activity"] == {"text": "Searching: NVIDIA margins", "kind": "action"}
    assert views[3]["status"] == "Searching: NVIDIA margins"
    assert views[4]["activity"]["text"] == "Earnings calendar: NVDA"
    assert views[5] == {"seq": 5, "type": "AUDIT"}
    assert views[7] == {
        "seq": 7,
        "type": "ANSWER",
        "content": "Revenue grew.",
        "status": "Writing the answer…",
    }
    assert views[9]["activity"] == {"text": "Retrying the language model", "kind": "quiet"}
    assert views[10]["activity"] == {"text": "search failed: timeout", "kind": "quiet"}
    assert views[11]["alert"] == "upstream model unavailable"
    assert views[12]["status"] == "Adding citations…"
    assert set(views[13]) == {"seq", "type", "chart_html"}  # drawn by charts.js
    assert views[13]["type"] == "CHART" and "data-chart" in views[13]["chart_html"]


def test_a_replayed_event_reads_exactly_as_the_live_one():
    for seq, message in enumerate(EVERY_EVENT, 1):
        live = event_from_message(message)  # from the wire, through the adapter
        stored = json.loads(json.dumps(live.data))  # as the event log keeps it
        assert stored_event_view(seq, stored) == event_view(seq, live)
    # Events logged before events had their own schema: the Bigdata message as received.
    for seq, message in enumerate(EVERY_EVENT, 1):
        assert stored_event_view(seq, message) == event_view(seq, event_from_message(message))


# --- Groups and publishing ---------------------------------------------------------------------


def test_group_names():
    assert protocol.stop_requests_group() == "turn.stop-requests"
    assert protocol.user_group(5) == "user.5"


@pytest.mark.django_db
async def test_publish_delivers_the_frame_to_every_member_of_the_group():
    layer = get_channel_layer()
    members = [await layer.new_channel() for _ in range(2)]
    outsider = await layer.new_channel()
    for channel in members:
        await layer.group_add(protocol.user_group(9), channel)
    frame = protocol.session_end()
    await protocol.publish(protocol.user_group(9), frame)
    for channel in members:
        assert await layer.receive(channel) == frame
    await protocol.publish(protocol.user_group(10), protocol.session_end())
    await layer.send(outsider, {"type": "marker"})
    assert await layer.receive(outsider) == {"type": "marker"}  # nothing else arrived first


# --- Client frames -----------------------------------------------------------------------------


def test_valid_client_frames_and_their_defaults():
    assert decode_client_frame('{"type": "ask", "message": "How?"}') == Ask(
        message="How?", research_effort="standard", parent_turn_id=LEAF, restart=False
    )
    assert decode_client_frame(
        '{"type": "ask", "message": "é ✓ 😀", "research_effort": "lite",'
        ' "parent_turn_id": null, "restart": true}'
    ) == Ask(message="é ✓ 😀", research_effort="lite", parent_turn_id=None, restart=True)
    assert decode_client_frame('{"type": "stop", "turn_id": 4}') == Stop(turn_id=4)
    assert decode_client_frame('{"type": "rerun", "turn_id": 4}') == Rerun(turn_id=4)
    assert decode_client_frame('{"type": "sync"}') == Sync(cursors={}, newest_turn_id=0)
    assert decode_client_frame(
        '{"type": "sync", "cursors": {"4": 2}, "newest_turn_id": 5}'
    ) == Sync(cursors={4: 2}, newest_turn_id=5)


BAD_FRAMES = [
    ("not json", "must be JSON"),
    ("[1, 2]", "JSON object"),
    ('"ask"', "JSON object"),
    ("[" * 5000 + "]" * 5000, "must be JSON"),  # nested too deep for the parser
    ("{}", "Unknown frame type"),
    ('{"type": "dance"}', "Unknown frame type"),
    ('{"type": "ask"}', "Write a question"),
    ('{"type": "ask", "message": "   "}', "Write a question"),
    ('{"type": "ask", "message": 5}', "Write a question"),
    ('{"type": "ask", "message": "' + "x" * 8001 + '"}', "limited to 8000 characters"),
    ('{"type": "ask", "message": "a\\ud800b"}', "cannot be sent"),  # a lone surrogate
    ('{"type": "ask", "message": "a\\udfffb"}', "cannot be sent"),
    ('{"type": "ask", "message": "a\\u0000b"}', "cannot be sent"),  # NUL
    ('{"type": "ask", "message": "q", "research_effort": "max"}', "research_effort"),
    ('{"type": "ask", "message": "q", "parent_turn_id": "7"}', "parent_turn_id"),
    ('{"type": "ask", "message": "q", "parent_turn_id": 0}', "parent_turn_id"),
    ('{"type": "ask", "message": "q", "restart": "yes"}', "restart"),
    ('{"type": "stop"}', "turn_id"),
    ('{"type": "stop", "turn_id": true}', "turn_id"),
    ('{"type": "stop", "turn_id": 1.5}', "turn_id"),
    ('{"type": "rerun"}', "rerun needs a turn_id"),
    ('{"type": "rerun", "turn_id": "4"}', "rerun needs a turn_id"),
    ('{"type": "sync", "cursors": []}', "cursors"),
    ('{"type": "sync", "cursors": {"x": 1}}', "cursors"),
    ('{"type": "sync", "cursors": {"\\u0661": 1}}', "cursors"),  # an Arabic-Indic digit
    ('{"type": "sync", "cursors": {"1": -1}}', "cursors"),
    (json.dumps({"type": "sync", "cursors": {str(i): 0 for i in range(1, 202)}}), "at most"),
    ('{"type": "sync", "newest_turn_id": -1}', "newest_turn_id"),
]


@pytest.mark.parametrize(("raw", "expected"), BAD_FRAMES)
def test_bad_client_frames_are_refused_saying_why(raw, expected, settings):
    settings.WEBSOCKET_MAX_FRAME_BYTES = 64 * 1024  # this test is about content, not size
    with pytest.raises(FrameError, match=expected) as refused:
        decode_client_frame(raw)
    assert refused.value.code == ErrorCode.BAD_FRAME


def test_binary_and_oversized_frames_are_refused():
    with pytest.raises(FrameError, match="JSON text"):
        decode_client_frame(None, b"\x00\x01")
    with pytest.raises(FrameError, match="limited to 16384 bytes"):
        decode_client_frame('{"type": "ask", "message": "' + "é" * 8200 + '"}')


# --- The API's event stream: each event one server-sent event, cut from its frame's text -----


def test_each_event_of_a_frame_is_one_server_sent_event_its_text_cut_from_the_frames():
    tricky = 'a\nb"},{"seq":99,"type":"FAKE"} ]}'  # a line break, and what splits events, quoted
    views = [
        event_view(4, event_from_message({"type": "ANSWER", "content": tricky})),
        event_view(5, event_from_message({"type": "NOT_ENTITLED", "message": "x"})),
        event_view(6, event_from_message({"type": 'ODD"TYPE\\', "n": 1})),
        event_view(7, event_from_message({"type": "ANSWER", "content": "é…"})),
    ]
    frame = protocol.encode(protocol.turn_events(7, views))
    assert protocol.event_stream_text(frame) == "".join(
        f"id: {seq}\nevent: {kind}\ndata: {compact_json(view)}\n\n"
        for (seq, kind), view in zip(
            [(4, "ANSWER"), (5, "NOT_ENTITLED"), (6, 'ODD\\"TYPE\\\\'), (7, "ANSWER")],
            views,
            strict=True,
        )
    )  # each event's text as encoding it alone writes it; a type JSON escapes, as JSON spells it
    for view, message in zip(views, protocol.event_stream_text(frame).split("\n\n"), strict=False):
        alone = protocol.encode(protocol.turn_events(7, [view]))  # a frame of one event
        assert protocol.event_stream_text(alone) == message + "\n\n"


def test_a_frame_of_no_events_is_nothing_and_other_frames_pass_whole_without_an_id():
    assert protocol.event_stream_text(protocol.encode(protocol.turn_events(7, []))) == ""
    notice = protocol.encode(protocol.turn_notice(7, "Retrying"))
    assert protocol.event_stream_text(notice) == f"event: turn.notice\ndata: {notice.text}\n\n"
