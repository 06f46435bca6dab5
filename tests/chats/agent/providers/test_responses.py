"""OpenAI and xAI: the Responses adapter's hold-back and citations, and the SDK clients against a
real stand-in HTTP server speaking the Responses wire."""

import io
import json
import logging
from pathlib import Path

import pytest
from django.core.management import call_command
from hypothesis import given, settings
from hypothesis import strategies as st

from chats.agent import AgentError
from chats.agent.events import ActionEvent, AnswerEvent, AuditEvent, CompleteEvent, ErrorEvent
from chats.agent.providers.responses import (
    LINK_SHAPES,
    OpenAIClient,
    ResponsesAdapter,
    XaiClient,
)
from chats.agent.providers.sdk import wire_document
from chats.agent.request import AgentRequest, AgentSettings, ConversationTurn
from chats.agent.sse import StreamMessage, parse_sse_text
from chats.agent.transcript import Transcript
from citations.render import render_markdown
from citations.render_html import render_html
from citations.resolve import resolve_citations
from demo_agent.scripted import Drop, Reply, Sleep
from tests.servers import free_port, serve_asgi
from tests.standins.responses import (
    answer_events,
    openai_error,
    responses_standin,
    sse,
    stream,
    xai_error,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "providers"
KEY = "sk-test-secret-4242"


# --- the adapter, fed documents directly ------------------------------------------------------


def feed_all(adapter, lines, *, close=True):
    """Feed SSE text (as the stand-in writes it) to an adapter; return the events."""
    events = []
    for line in "".join(lines).splitlines():
        if line.startswith("data: "):
            document = json.loads(line[6:])
            message = StreamMessage(event=document["type"], document=document, text=line[6:])
            events.extend(adapter.feed(message) or [])
    if close:
        events.extend(adapter.close())
    return events


def cited(events):
    transcript = Transcript.from_events(events)
    answer = resolve_citations(
        answer=transcript.answer, citations=transcript.citations, tool_calls=transcript.tool_calls
    )
    return transcript, answer


def link_annotation(text, link, url, title="1"):
    start = text.index(link)
    return {
        "type": "url_citation",
        "url": url,
        "title": title,
        "start_index": start,
        "end_index": start + len(link),
    }


XAI_TEXT = "Colossus is in Memphis.[[1]](https://x.ai/news/colossus) It has 200k GPUs."
XAI_LINK = "[[1]](https://x.ai/news/colossus)"
OPENAI_TEXT = (
    "Tokyo has 14 million people. ([metro.tokyo.lg.jp](https://metro.tokyo.lg.jp/p)) It is big."
)
OPENAI_LINK = " ([metro.tokyo.lg.jp](https://metro.tokyo.lg.jp/p))"


@pytest.mark.parametrize("provider", ["xai", "openai"])
def test_capture_renders_to_its_markdown(provider):
    out = io.StringIO()
    call_command(
        "render_stream", str(FIXTURES / f"{provider}.sse"), "--provider", provider, stdout=out
    )
    assert out.getvalue() == (FIXTURES / f"{provider}.md").read_text()


@pytest.mark.parametrize(
    ("flavour", "text", "link", "answer", "marker_at"),
    [
        ("xai", XAI_TEXT, XAI_LINK, "Colossus is in Memphis. It has 200k GPUs.", 23),
        ("openai", OPENAI_TEXT, OPENAI_LINK, "Tokyo has 14 million people. It is big.", 28),
    ],
)
def test_an_inline_link_split_anywhere_is_removed_and_cited_where_it_stood(
    flavour, text, link, answer, marker_at
):
    annotation = link_annotation(text, link, "https://example.com/a")
    for split in range(1, len(text)):
        adapter = ResponsesAdapter(flavour)
        first = feed_all(adapter, answer_events([text[:split]])[:3], close=False)
        emitted_first = "".join(e.content for e in first if isinstance(e, AnswerEvent))
        # Only a tail that may still become a link waits; everything before it is out at once.
        assert answer.startswith(emitted_first)
        certain = text[: min(split, text.index(link))]
        if flavour == "openai":  # a space may be the start of " ([host](url))"
            certain = certain.rstrip(" ")
        assert len(emitted_first) >= len(certain), split
        rest = answer_events([text[:split], text[split:]], [annotation])[3:]
        events = first + feed_all(adapter, rest)
        transcript, result = cited(events)
        assert transcript.answer == answer, split
        assert [m.offset for m in result.markers] == [marker_at], split
        assert render_markdown(result).startswith(answer[:marker_at] + "[^1]")


def test_a_link_split_across_three_deltas_at_every_pair_of_positions():
    annotation = link_annotation(XAI_TEXT, XAI_LINK, "https://x.ai/news/colossus")
    start = XAI_TEXT.index(XAI_LINK)
    for i in range(start - 2, start + len(XAI_LINK) + 2):
        for j in range(i + 1, start + len(XAI_LINK) + 3):
            deltas = [XAI_TEXT[:i], XAI_TEXT[i:j], XAI_TEXT[j:]]
            transcript, result = cited(
                feed_all(ResponsesAdapter("xai"), answer_events(deltas, [annotation]))
            )
            assert transcript.answer == "Colossus is in Memphis. It has 200k GPUs."
            assert [m.offset for m in result.markers] == [23]


@pytest.mark.parametrize(
    ("flavour", "text"),
    [
        ("xai", "See [[note]] and [[1]] (plain) and [[2]](not a url) and [x](https://a.b/c) ["),
        ("xai", "Arrays like a[[1]] stay, as does [[12345]](https://too.many/digits)."),
        ("openai", "A (parenthesis) and ([a link] text) and [x](https://a.b/c) stay ("),
        ("openai", "Code: f([1](2)) and ( [host](https://a.b/c) ) and ([h](ftp://a.b)) ( "),
    ],
)
def test_text_that_only_looks_like_a_link_start_is_kept_exactly(flavour, text):
    for split in range(1, len(text)):
        events = feed_all(ResponsesAdapter(flavour), answer_events([text[:split], text[split:]]))
        transcript, _result = cited(events)
        assert transcript.answer == text
        assert transcript.citations == []


def test_annotations_streamed_or_only_in_completed_give_the_same_citations():
    annotation = link_annotation(XAI_TEXT, XAI_LINK, "https://x.ai/news/colossus")
    results = []
    for streamed in (True, False):
        events = feed_all(
            ResponsesAdapter("xai"), answer_events([XAI_TEXT], [annotation], streamed=streamed)
        )
        transcript, result = cited(events)
        # Streamed and repeated in response.completed: counted once.
        assert len(transcript.citations) == 1
        results.append(render_markdown(result))
    assert results[0] == results[1]
    assert results[0].startswith("Colossus is in Memphis.[^1] It has")


def test_an_annotation_before_its_text_is_decided_waits_for_it():
    annotation = link_annotation(XAI_TEXT, XAI_LINK, "https://x.ai/news/colossus")
    cut = XAI_TEXT.index(XAI_LINK) + 10
    lines = answer_events([XAI_TEXT[:cut], XAI_TEXT[cut:]], [annotation])
    # Move the annotation ahead of the delta that completes the link.
    annotation_line = next(line for line in lines if "annotation.added" in line)
    lines.remove(annotation_line)
    lines.insert(3, annotation_line)
    transcript, result = cited(feed_all(ResponsesAdapter("xai"), lines))
    assert [(c.start, c.end) for c in transcript.citations] == [(0, 23)]
    assert [m.offset for m in result.markers] == [23]


def test_a_link_no_annotation_names_still_cites_its_url():
    transcript, result = cited(feed_all(ResponsesAdapter("xai"), answer_events([XAI_TEXT])))
    assert transcript.answer == "Colossus is in Memphis. It has 200k GPUs."
    assert [s.url for s in result.sources] == ["https://x.ai/news/colossus"]
    assert [s.label for s in result.sources] == ["x.ai"]


def test_an_annotation_on_plain_text_is_the_claim_in_code_points():
    text = "東京 🏳️‍🌈 é ✓ Tokyo is large. Done."
    claim = "Tokyo is large."
    start = text.index(claim)
    annotation = {
        "type": "url_citation",
        "url": "https://www.example.org/t",
        "title": "",
        "start_index": start,
        "end_index": start + len(claim),
    }
    _transcript, result = cited(
        feed_all(ResponsesAdapter("openai"), answer_events([text], [annotation]))
    )
    assert [m.offset for m in result.markers] == [start + len(claim)]
    assert render_markdown(result).startswith(text[: start + len(claim)] + "[^1] Done.")
    assert result.sources[0].label == "example.org"  # no title: the host without www.


def test_offsets_after_removed_links_and_multibyte_text():
    first = "[[1]](https://a.example/1)"
    second = "[[2]](https://b.example/2)"
    text = f"🙂 café.{first} 東京.{second}{first} end"
    annotations = [
        link_annotation(text, first, "https://a.example/1"),
        link_annotation(text, second, "https://b.example/2"),
        {**link_annotation(text, first, "https://a.example/1"), "start_index": text.rindex(first)},
    ]
    annotations[2]["end_index"] = annotations[2]["start_index"] + len(first)
    transcript, result = cited(
        feed_all(ResponsesAdapter("xai"), answer_events([text], annotations))
    )
    assert transcript.answer == "🙂 café. 東京. end"
    assert render_markdown(result).splitlines()[0] == "🙂 café.[^1] 東京.[^1][^2] end"


def test_search_calls_consulted_sources_and_completion():
    events = feed_all(
        ResponsesAdapter("xai"),
        answer_events(
            ["Hi."],
            citations=["https://x.com/i/status/1", "https://x.ai/news"],
            query="xAI news",
            response_id="resp_77",
        ),
    )
    actions = [e for e in events if isinstance(e, ActionEvent)]
    assert [(a.tool_name, a.tool_arguments) for a in actions] == [
        ("web_search", {"query": "xAI news"})
    ]
    audits = [e for e in events if isinstance(e, AuditEvent)]
    assert [r.url for r in audits[-1].tool_calls[0].results] == [
        "https://x.com/i/status/1",
        "https://x.ai/news",
    ]
    complete = events[-1]
    assert isinstance(complete, CompleteEvent)
    assert complete.checkpoint_id == "resp_77"
    assert complete.consumption[0]["output_tokens"] == 20
    assert all(e.raw for e in events)


def test_failed_and_error_events_end_with_a_clear_message():
    failed = sse(
        "response.failed",
        3,
        response={
            "id": "r",
            "status": "failed",
            "error": {"code": "server_error", "message": "Boom"},
        },
    )
    events = feed_all(
        ResponsesAdapter("openai"), [*answer_events(["Part"], complete=False), failed]
    )
    assert events[-1] == ErrorEvent(error="OpenAI reported an error: Boom")
    error = sse("error", 3, code="rate_limit_exceeded", message="Slow down", param=None)
    events = feed_all(ResponsesAdapter("xai"), [*answer_events(["Part"], complete=False), error])
    assert events[-1] == ErrorEvent(error="xAI reported an error: Slow down")
    refused = sse("response.refusal.done", 3, refusal="I can't help with that.")
    events = feed_all(ResponsesAdapter("openai"), [refused])
    assert events[-1].error == "OpenAI declined to answer: I can't help with that."


def test_a_stream_cut_before_completed_has_no_completion_but_keeps_held_text():
    events = feed_all(
        ResponsesAdapter("xai"), answer_events(["Memphis. [[1]](htt"], complete=False)
    )
    transcript = Transcript.from_events(events)
    assert not transcript.completed
    assert transcript.answer == "Memphis. [[1]](htt"


def test_not_a_responses_document_counts_as_malformed():
    delta = {"type": "response.output_text.delta", "delta": 5}
    body = f"data: [1]\n\ndata: {json.dumps(delta)}\n\n"
    assert parse_sse_text(body, ResponsesAdapter("openai")) == ([], 2)


# --- the SDK clients against the stand-in -----------------------------------------------------


@pytest.fixture
def standin():
    app = responses_standin()
    with serve_asgi(app) as url:
        app.url = url
        yield app


def client(cls, url, request=None, *, notices=None, **config):
    config.setdefault("max_retries", 2)
    config.setdefault("backoff_base", 0.01)
    return cls(
        request or AgentRequest(message="What is new at xAI?"),
        AgentSettings(api_key=KEY, url=f"{url}/v1", model="model-x", **config),
        on_retry=(lambda message, delay: _note(notices, message, delay))
        if notices is not None
        else None,
    )


async def _note(notices, message, delay):
    notices.append((message, delay))


async def run(stream):
    return [event async for event in stream.events()]


@pytest.mark.parametrize(("cls", "provider"), [(OpenAIClient, "openai"), (XaiClient, "xai")])
async def test_the_sdk_streams_the_capture_to_its_exact_markdown(standin, cls, provider):
    standin.queue(Reply.capture(FIXTURES / f"{provider}.sse"))
    events = await run(client(cls, standin.url))
    _, result = cited(events)
    assert render_markdown(result) == (FIXTURES / f"{provider}.md").read_text()
    assert standin.paths == ["POST /v1/responses"]
    body = standin.payloads[0]
    assert body["model"] == "model-x"
    assert body["stream"] is True
    assert body["input"] == [{"role": "user", "content": "What is new at xAI?"}]
    tools = [t["type"] for t in body["tools"]]
    assert tools == (["web_search"] if provider == "openai" else ["web_search", "x_search"])
    assert standin.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert isinstance(events[-1], CompleteEvent)


async def test_a_follow_up_continues_from_the_previous_response(standin):
    standin.queue(stream(*answer_events(["Yes."])), stream(*answer_events(["Again."])))
    history = (ConversationTurn(question="Q1", answer="A1"),)
    await run(
        client(
            OpenAIClient,
            standin.url,
            AgentRequest(message="Q2", history=history, previous_response_id="resp_1"),
        )
    )
    await run(client(OpenAIClient, standin.url, AgentRequest(message="Q2", history=history)))
    first, second = standin.payloads
    assert first["previous_response_id"] == "resp_1"
    assert first["input"] == [{"role": "user", "content": "Q2"}]
    assert "previous_response_id" not in second
    assert second["input"] == [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
    ]


@pytest.mark.parametrize(
    ("reply", "cls", "message"),
    [
        (
            openai_error(401, f"Incorrect API key provided: {KEY}", kind="invalid_request_error"),
            OpenAIClient,
            "OpenAI did not accept the API key (check OPENAI_API_KEY).",
        ),
        (
            xai_error(401, f"Incorrect API key provided: {KEY}"),
            XaiClient,
            "xAI did not accept the API key (check XAI_API_KEY).",
        ),
        (
            openai_error(403, f"Project lacks access to model-x (key {KEY})"),
            OpenAIClient,
            "The OpenAI API key is not allowed to make this request: "
            "Project lacks access to model-x (key [redacted]).",
        ),
        (
            openai_error(400, "Invalid value for 'input'."),
            OpenAIClient,
            "OpenAI rejected the request: Invalid value for 'input'.",
        ),
    ],
)
async def test_refusals_become_clear_errors_without_the_key(standin, caplog, reply, cls, message):
    standin.queue(reply)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AgentError) as raised:
        await run(client(cls, standin.url))
    assert raised.value.user_message == message
    assert raised.value.kind == "http"
    assert len(standin.requests) == 1  # not retried
    assert KEY not in caplog.text


async def test_429_is_retried_after_retry_after_then_answers(standin):
    standin.queue(
        openai_error(429, "Rate limit reached", kind="rate_limit_error", **{"Retry-After": "0.2"}),
        stream(*answer_events(["Fine."])),
    )
    notices = []
    events = await run(client(OpenAIClient, standin.url, notices=notices))
    assert Transcript.from_events(events).answer == "Fine."
    assert notices == [
        ("OpenAI is rate limiting requests; retried and gave up: Rate limit reached.", 0.2)
    ]
    assert len(standin.requests) == 2


async def test_5xx_is_retried_until_it_gives_up(standin):
    standin.queue(*[openai_error(503, "Overloaded", kind="server_error")] * 3)
    with pytest.raises(AgentError) as raised:
        await run(client(OpenAIClient, standin.url, max_retries=2))
    assert raised.value.user_message == "OpenAI failed (HTTP 503): Overloaded."
    assert len(standin.requests) == 3


async def test_unreachable():
    with pytest.raises(AgentError) as raised:
        await run(client(OpenAIClient, f"http://127.0.0.1:{free_port()}", max_retries=1))
    assert raised.value.kind == "unreachable"
    assert raised.value.user_message == "Could not reach OpenAI."


async def test_a_stall_ends_the_run(standin):
    standin.queue(stream(*answer_events(["Hel"], complete=False), Sleep(1.5)))
    with pytest.raises(AgentError) as raised:
        await run(client(XaiClient, standin.url, idle_timeout=0.5))
    assert raised.value.kind == "stalled"
    assert raised.value.user_message == "xAI sent nothing for 0.5 s, so the answer was cut off."


async def test_a_dropped_connection_mid_answer(standin):
    standin.queue(stream(*answer_events(["Hel"], complete=False), Drop()))
    received = []
    with pytest.raises(AgentError) as raised:
        async for event in client(OpenAIClient, standin.url).events():
            received.append(event)
    assert raised.value.kind == "dropped"
    assert raised.value.user_message == "The connection to OpenAI dropped mid-answer."
    assert Transcript.from_events(received).answer == "Hel"
    assert len(standin.requests) == 1  # never replayed once events flowed


async def test_a_body_that_ends_without_completed_is_cut(standin):
    standin.queue(stream(*answer_events(["Hel"], complete=False)))
    with pytest.raises(AgentError) as raised:
        await run(client(OpenAIClient, standin.url))
    assert raised.value.kind == "dropped"


async def test_response_failed_and_error_events_reach_the_turn(standin):
    failed = sse("response.failed", 9, response={"id": "r", "error": {"message": "Boom"}})
    standin.queue(stream(*answer_events(["Part"], complete=False), failed))
    events = await run(client(OpenAIClient, standin.url))
    assert events[-1] == ErrorEvent(error="OpenAI reported an error: Boom")
    standin.queue(stream(sse("error", 0, code="server_error", message="Oops", param=None)))
    events = await run(client(XaiClient, standin.url))
    assert events[-1] == ErrorEvent(error="xAI reported an error: Oops")


@pytest.mark.parametrize(("cls", "provider"), [(OpenAIClient, "openai"), (XaiClient, "xai")])
async def test_sdk_event_objects_dump_back_to_the_wire_json(standin, cls, provider):
    capture = (FIXTURES / f"{provider}.sse").read_text()
    wire = [json.loads(line[6:]) for line in capture.splitlines() if line.startswith("data: ")]
    standin.queue(Reply.capture(FIXTURES / f"{provider}.sse"))
    runner = client(cls, standin.url)
    sdk = runner._client()
    try:
        dumped = [wire_document(item) async for item in await runner._open(sdk)]
    finally:
        await sdk.close()
    assert dumped == wire


def test_an_annotation_beyond_the_text_is_reported_not_lost():
    annotation = {
        "type": "url_citation",
        "url": "https://a.example/",
        "start_index": 2,
        "end_index": 99,
    }
    transcript, result = cited(
        feed_all(ResponsesAdapter("openai"), answer_events(["Short."], [annotation]))
    )
    assert transcript.completed
    assert [r.problem for r in result.invalid_references] == [
        "span 2-99 is outside its output text"
    ]
    assert render_markdown(result) == "Short."


@pytest.mark.parametrize(
    "document",
    [
        {"type": "error", "error": "Model overloaded"},
        {"type": "error", "error": {"message": "Model overloaded", "code": "overloaded"}},
        {"type": "error", "code": "overloaded", "message": "Model overloaded"},
    ],
)
def test_every_error_shape_keeps_its_message(document):
    events = ResponsesAdapter("xai").feed(StreamMessage(event="error", document=document, text=""))
    assert events[-1].error == "xAI reported an error: Model overloaded"


PIECES = {
    "xai": ["[", "[[", "]]", "]", "(", ")", "[[1]]", "(https://x.ai/a)", "[[2]](https://x.ai/b)"],
    "openai": [" (", "([", "](", "))", "[a.b]", " ([a.b](https://a.b/c))", "(https://a.b/c)"],
}


@pytest.mark.parametrize("flavour", ["xai", "openai"])
@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_the_answer_does_not_depend_on_how_the_text_was_split(flavour, data):
    """Property: the streamed answer is the text with every link removed, however it is cut."""
    words = st.sampled_from([*PIECES[flavour], "a", " ", "🙂", "é", "\n", "http", "://"])
    text = "".join(data.draw(st.lists(words, max_size=25)))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    events = feed_all(ResponsesAdapter(flavour), answer_events([d for d in deltas if d]))
    transcript = Transcript.from_events(events)
    assert transcript.answer == LINK_SHAPES[flavour].full.sub("", text)
    # Every removed link is a citation whose marker stands where the link stood.
    assert len(transcript.citations) == len(LINK_SHAPES[flavour].full.findall(text))


@pytest.mark.parametrize(
    ("flavour", "text", "held"),
    [
        ("openai", "Prices ([see note) rose and kept rising", ""),
        ("openai", "Prices rose ([reuters.com](https://reu", " ([reuters.com](https://reu"),
        ("openai", "Prices rose ", " "),
        ("xai", "Prices rose [[2] and more", ""),
        ("xai", "Prices rose.[[2]](https://x.c", "[[2]](https://x.c"),
    ],
)
def test_only_a_possible_link_is_held_back(flavour, text, held):
    events = feed_all(ResponsesAdapter(flavour), answer_events([text])[:3], close=False)
    emitted = "".join(e.content for e in events if isinstance(e, AnswerEvent))
    assert emitted + held == text
    assert emitted == text.removesuffix(held)


# --- citations without a position, malformed offsets ------------------------------------------


def unplaced_annotation(n):
    """xAI's `url_citation` when inline citations are off: a URL and its number, no offsets."""
    return {"type": "url_citation", "url": f"https://news.example/{n}", "title": str(n)}


async def test_xai_citations_without_a_position_are_all_listed_as_not_placed(standin):
    annotations = [unplaced_annotation(n) for n in range(1, 6)]
    standin.queue(stream(*answer_events(["Grok 5 ships ", "in May."], annotations)))
    events = await run(client(XaiClient, standin.url))
    transcript, result = cited(events)
    assert transcript.completed
    assert result.invalid_references == []
    assert [s.url for s in result.sources] == [f"https://news.example/{n}" for n in range(1, 6)]
    assert all(not s.placed for s in result.sources)
    markdown = render_markdown(result)
    assert markdown.startswith("Grok 5 ships in May.\n\n[^1]: [news.example]")
    assert markdown.count("(not placed in the text)") == 5
    html = render_html(result, doc_id="t1")
    assert html.count('<span class="source-unplaced">(not placed in the text)</span>') == 5
    assert 'href="https://news.example/5"' in html


def test_a_source_cited_in_place_and_unplaced_is_numbered_once_in_place():
    text = XAI_TEXT
    annotations = [
        link_annotation(text, XAI_LINK, "https://x.ai/news/colossus"),
        {"type": "url_citation", "url": "https://x.ai/news/colossus", "title": "1"},
        unplaced_annotation(7),
    ]
    _, result = cited(feed_all(ResponsesAdapter("xai"), answer_events([text], annotations)))
    assert [(s.url, s.placed) for s in result.sources] == [
        ("https://x.ai/news/colossus", True),
        ("https://news.example/7", False),
    ]
    assert render_markdown(result) == (
        "Colossus is in Memphis.[^1] It has 200k GPUs.\n\n"
        "[^1]: [x.ai](https://x.ai/news/colossus)\n"
        "[^2]: [news.example](https://news.example/7) (not placed in the text)\n"
    )


@pytest.mark.parametrize(
    ("flavour", "start", "end"), [("xai", "23", 57), ("openai", 2.5, 9), ("xai", 23, None)]
)
def test_a_malformed_offset_drops_only_that_citation(flavour, start, end):
    text = XAI_TEXT if flavour == "xai" else OPENAI_TEXT
    good = link_annotation(text, XAI_LINK if flavour == "xai" else OPENAI_LINK, "https://a.ex/")
    bad = {"type": "url_citation", "url": "https://b.ex/", "start_index": start}
    if end is not None:
        bad["end_index"] = end
    transcript, result = cited(
        feed_all(ResponsesAdapter(flavour), answer_events([text], [bad, good]))
    )
    assert transcript.completed
    assert [s.url for s in result.sources] == ["https://a.ex/"]
    assert len(result.invalid_references) == 1
    assert "not integers" in result.invalid_references[0].problem


async def test_file_search_citations_are_listed_by_their_file_names(standin):
    text = "Revenue grew 12%. Margin was 31%."
    annotations = [
        {"type": "file_citation", "file_id": "file-q3", "filename": "q3-letter.pdf", "index": 17},
        {"type": "file_citation", "file_id": "file-ar", "filename": "annual.pdf", "index": 33},
        {
            "type": "container_file_citation",
            "container_id": "cntr_1",
            "file_id": "cfile_9",
            "filename": "margins.csv",
            "start_index": 18,
            "end_index": 33,
        },
    ]
    standin.queue(stream(*answer_events([text], annotations)))
    _, result = cited(await run(client(OpenAIClient, standin.url)))
    assert result.invalid_references == []
    assert [(s.label, s.type, s.placed) for s in result.sources] == [
        ("margins.csv", "DOCUMENT", True),
        ("q3-letter.pdf", "DOCUMENT", False),
        ("annual.pdf", "DOCUMENT", False),
    ]
    assert render_markdown(result) == (
        "Revenue grew 12%. Margin was 31%.[^1]\n\n"
        "[^1]: margins.csv\n"
        "[^2]: q3-letter.pdf (not placed in the text)\n"
        "[^3]: annual.pdf (not placed in the text)\n"
    )
