"""The SSE parser, on every shared capture and on the awkward parts of the format."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chats.agent.events import (
    KNOWN_TYPES,
    AnswerEvent,
    CompleteEvent,
    ErrorEvent,
    GroundingEvent,
    UnknownEvent,
)
from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.sse import (
    LineSplitter,
    StreamReader,
    aiter_events,
    json_document,
    parse_sse_text,
)
from chats.agent.transcript import Transcript

CAPTURES = ["dedup", "error", "lifecycle", "tool_level", "workflow"]


def line(message, **envelope):
    return "data: " + json.dumps({"chat_id": "c1", **envelope, "message": message}) + "\n"


@pytest.mark.parametrize("name", CAPTURES)
def test_every_capture_parses_without_loss(stream_fixtures_dir, name):
    text = (stream_fixtures_dir / f"{name}.sse").read_text()
    events, malformed = parse_sse_text(text, BigdataAdapter())
    data_lines = [raw for raw in text.splitlines() if raw.startswith("data:")]
    assert malformed == 0
    assert len(events) == len(data_lines)
    transcript = Transcript.from_events(events)
    answer_chunks = [json.loads(raw[5:]) for raw in data_lines]
    expected_answer = "".join(
        (doc.get("message") or doc.get("delta"))["content"]
        for doc in answer_chunks
        if (doc.get("message") or doc.get("delta"))["type"] == "ANSWER"
    )
    assert transcript.answer == expected_answer
    assert transcript.completed is (name != "error")
    assert bool(transcript.error) is (name == "error")


def test_workflow_envelope_reads_delta(stream_fixtures_dir):
    events, _ = parse_sse_text((stream_fixtures_dir / "workflow.sse").read_text(), BigdataAdapter())
    assert isinstance(events[0], GroundingEvent)
    assert isinstance(events[-1], CompleteEvent)
    assert events[-1].checkpoint_id == "ckpt-h1"


def test_lifecycle_capture_has_all_types_typed(stream_fixtures_dir):
    events, _ = parse_sse_text(
        (stream_fixtures_dir / "lifecycle.sse").read_text(), BigdataAdapter()
    )
    types = {e.type for e in events}
    # Every type of a run that completes, but charts (not asked for) and the failures.
    assert types == set(KNOWN_TYPES) - {"CHART", "LLM_RETRY", "TOOL_ERROR", "ERROR"}
    for event in events:
        assert event.type in KNOWN_TYPES and not isinstance(event, UnknownEvent)
    transcript = Transcript.from_events(events)
    assert transcript.structured_output == {"company": "NVIDIA", "revenue_q2_fy26": 46.74}
    assert transcript.plan["steps"][0]["status"] == "COMPLETED"
    assert [t.tool_id for t in transcript.tool_calls] == ["audit-42", "audit-43"]
    assert transcript.upstream_chat_id == "chat-h1"


def test_heartbeats_comments_fields_and_crlf_are_normal():
    text = (
        ": keep-alive\r\n"
        "event: message\r\n"
        "id: 7\r\n"
        "retry: 1000\r\n"
        "\r\n"
        + line({"type": "ANSWER", "content": "Hi "}).replace("\n", "\r\n")
        + "\r\n"
        + ":\n"
        + "data:"
        + json.dumps({"message": {"type": "ANSWER", "content": "there"}})
        + "\n"
        + line({"type": "COMPLETE", "checkpoint_id": "k"})
    )
    events, malformed = parse_sse_text(text, BigdataAdapter())
    assert malformed == 0
    assert [e.type for e in events] == ["ANSWER", "ANSWER", "COMPLETE"]
    assert Transcript.from_events(events).answer == "Hi there"


def test_malformed_lines_are_skipped_and_counted():
    text = (
        "data: {not json\n"
        + line({"type": "ANSWER", "content": "a"})
        + 'data: {"chat_id": "c1"}\n'  # no message
        + 'data: {"message": {"content": "no type"}}\n'
        + "data: [1, 2]\n"
        + "data: "
        + "[" * 100_000
        + "]" * 100_000
        + "\n"
        + line({"type": "ANSWER", "content": "b"})
    )
    events, malformed = parse_sse_text(text, BigdataAdapter())
    assert malformed == 5
    assert Transcript.from_events(events).answer == "ab"


def test_unknown_types_are_kept_not_fatal():
    text = line({"type": "NOT_ENTITLED", "feature": "c", "start": 0}) + line(
        {"type": "ANSWER", "content": "x"}
    )
    events, _ = parse_sse_text(text, BigdataAdapter())
    assert isinstance(events[0], UnknownEvent)
    assert events[0].type == "NOT_ENTITLED"
    assert events[0].data["feature"] == "c"
    assert isinstance(events[1], AnswerEvent)


def test_answer_content_is_never_trimmed():
    events, _ = parse_sse_text(line({"type": "ANSWER", "content": "  spaced \n"}), BigdataAdapter())
    assert events[0].content == "  spaced \n"


def test_error_event_has_a_message_even_without_one():
    events, _ = parse_sse_text(line({"type": "ERROR"}), BigdataAdapter())
    assert isinstance(events[0], ErrorEvent)
    assert events[0].error


async def test_events_arrive_whatever_the_chunking(stream_fixtures_dir):
    text = (stream_fixtures_dir / "lifecycle.sse").read_text().replace("\n", "\r\n")
    expected, _ = parse_sse_text(text, BigdataAdapter())

    async def chunks(size):
        for i in range(0, len(text), size):
            yield text[i : i + size]

    for size in (1, 2, 7, 64, 10_000):
        parser = StreamReader(BigdataAdapter())
        got = [e async for e in aiter_events(chunks(size), parser)]
        assert [e.data for e in got] == [e.data for e in expected], size
        assert parser.malformed_lines == 0


async def test_an_event_is_yielded_as_soon_as_its_line_ends():
    """The Research Agent ends events with one newline: nothing may wait for a blank line."""
    arrived = []

    async def chunks():
        yield line({"type": "ANSWER", "content": "first"})
        arrived.append("second chunk requested")
        yield line({"type": "ANSWER", "content": "second"})

    parser = StreamReader(BigdataAdapter())
    stream = aiter_events(chunks(), parser)
    first = await anext(stream)
    assert first.content == "first"
    assert arrived == []
    await stream.aclose()


def test_a_line_over_the_cap_is_skipped_whole_and_counted():
    reader = StreamReader(BigdataAdapter(), max_line_chars=100)
    events = reader.feed_text(line({"type": "ANSWER", "content": "x" * 200}))
    events += reader.feed_text(line({"type": "ANSWER", "content": "ok"}))
    events += reader.close()
    assert [e.content for e in events if e.type == "ANSWER"] == ["ok"]
    assert reader.malformed_lines == 1
    # ... and said, with its size and the setting that bounds it.
    assert [e.notice for e in events if e.type == "STREAM_SKIPPED"] == [
        "Part of the answer (269 bytes) was over AGENT_MAX_LINE_BYTES and is not shown."
    ]


def test_an_endless_line_is_dropped_as_it_arrives_not_buffered():
    reader = StreamReader(BigdataAdapter(), max_line_chars=1000)
    for _ in range(1000):
        reader.feed_text("data: " + "x" * 1000)
    assert reader.splitter._buffered == 0  # nothing held past the cap
    reader.feed_text("\n" + line({"type": "ANSWER", "content": "after"}))
    assert [e.content for e in reader.close()] == []
    assert reader.malformed_lines == 1


def test_lines_split_on_cr_lf_and_crlf_even_across_chunks():
    reader = StreamReader(BigdataAdapter())
    text = line({"type": "ANSWER", "content": "a"}).replace("\n", "\r")
    text += line({"type": "ANSWER", "content": "b"}).replace("\n", "\r\n")
    events = []
    for i in range(len(text)):
        events += reader.feed_text(text[i])
    events += reader.close()
    assert [e.content for e in events] == ["a", "b"]


def test_lf_and_crlf_bodies_split_alike_wherever_a_chunk_ends():
    """LF-only chunks take a faster path than chunks with CRs: both give the same lines, with
    the same line over the cap dropped, wherever the body is cut in two."""
    text = "data: a\n\nevent: x\ndata: " + "y" * 30 + "\n\n: comment\ndata: z\n"
    expected = [part for part in text.split("\n")[:-1] if len(part) <= 20]
    for body in (text, text.replace("\n", "\r\n")):
        for cut in range(len(body) + 1):
            splitter = LineSplitter(max_line_chars=20)
            lines = splitter.decode(body[:cut]) + splitter.decode(body[cut:]) + splitter.flush()
            assert (lines, splitter.oversized_lines) == (expected, 1), (body, cut)


def test_bytes_split_as_text_does_wherever_a_chunk_ends():
    """A body read as bytes gives the lines its text would, each decoded once: a character cut
    between two chunks is whole, bytes that are not UTF-8 become U+FFFD, as a decoder with
    errors="replace" makes them, and the cap counts bytes."""
    body = ("data: a\n\nevent: x\ndata: " + "y" * 30 + "\n\n: é€😀\ndata: z").encode() + b"\xff\n"
    lines = body.decode("utf-8", "replace").split("\n")[:-1]
    expected = [part for part in lines if len(part.encode()) <= 20]
    for raw in (body, body.replace(b"\n", b"\r\n")):
        for cut in range(len(raw) + 1):
            splitter = LineSplitter(max_line_chars=20)
            lines = splitter.decode(raw[:cut]) + splitter.decode(raw[cut:]) + splitter.flush()
            decoded = [line.decode("utf-8", "replace") for line in lines]
            assert (decoded, splitter.oversized_lines) == (expected, 1), (raw, cut)


def test_a_body_read_as_bytes_gives_the_events_of_its_text(stream_fixtures_dir):
    text = (stream_fixtures_dir / "lifecycle.sse").read_text().replace("\n", "\r\n")
    expected, _ = parse_sse_text(text, BigdataAdapter())
    body = text.encode()
    for size in (1, 3, 64, 10_000):
        reader = StreamReader(BigdataAdapter())
        got = [e for i in range(0, len(body), size) for e in reader.feed(body[i : i + size])]
        got += reader.close()
        assert [(e.data, e.raw) for e in got] == [(e.data, e.raw) for e in expected], size
        assert reader.malformed_lines == 0


def test_bytes_that_are_not_utf8_are_read_as_replacement_characters():
    reader = StreamReader(BigdataAdapter(), max_line_chars=100)
    bad = b'data: {"message": {"type": "ANSWER", "content": "caf\xe9"}}\n'  # Latin-1's é
    events = reader.feed(bad) + reader.feed(b"data: " + b"x" * 200 + b"\n") + reader.close()
    assert [e.content for e in events if e.type == "ANSWER"] == ["caf\ufffd"]
    assert [e.notice for e in events if e.type == "STREAM_SKIPPED"] == [
        "An event of the agent's stream (206 bytes) was over AGENT_MAX_LINE_BYTES and is not shown."
    ]


# What the standard library reads differently from orjson, or orjson refuses.
UNUSUAL_JSON = [
    '{"n": 12345678901234567890123}',  # past 64 bits: orjson would read a float
    '{"n": -9223372036854775809}',
    '{"n": 18446744073709551616}',
    '{"n": 1e999, "m": -1E400}',  # infinities
    '{"n": NaN, "m": Infinity}',
    '{"text": "\\ud800 lone"}',  # a lone surrogate escape
    '{"big": 1.7976931348623157e309}',
    '{"a": 1, "a": 2}',
]


@pytest.mark.parametrize("text", UNUSUAL_JSON)
def test_json_documents_read_as_the_standard_library_reads_them(text):
    assert repr(json_document(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ['{"a": 1', "[1,]", '"\x01"', '{"a": 1}x', "\ufeff{}"])
def test_text_that_is_not_json_is_refused(text):
    with pytest.raises(ValueError):
        json_document(text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: past 64 bits too
    | st.floats()  # NaN and the infinities too
    | st.text(),  # lone surrogates too
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_any_json_reads_as_the_standard_library_reads_it(value):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        try:
            expected = repr(json.loads(text))
        except ValueError:  # ensure_ascii=False with a lone surrogate: not UTF-8 text
            continue
        assert repr(json_document(text)) == expected
