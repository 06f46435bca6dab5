"""Gemini: the adapter's reading of the wire, and the official SDK against a real stand-in."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from django.core.management import call_command

from chats.agent import AgentError
from chats.agent.events import ActionEvent, CompleteEvent, ErrorEvent
from chats.agent.providers import PROVIDERS
from chats.agent.providers.gemini import GeminiAdapter, GeminiClient
from chats.agent.request import AgentRequest, AgentSettings, ConversationTurn
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from citations.render import render_markdown
from citations.resolve import resolve_citations
from demo_agent.scripted import Drop, Reply, Sleep
from tests.servers import free_port, serve_asgi
from tests.standins.gemini import GeminiStandIn, chunk, error, grounded_answer, sse, stream

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "providers"
KEY = "AIzaSy-test-key-not-a-secret-0123"


def read(body: str):
    events, malformed = parse_sse_text(body, GeminiAdapter())
    return Transcript.from_events(events), events, malformed


def markdown(transcript: Transcript) -> str:
    return render_markdown(
        resolve_citations(answer=transcript.answer, citations=transcript.citations)
    )


# --- the capture ----------------------------------------------------------------------------


def test_capture_renders_to_its_markdown():
    out = io.StringIO()
    call_command(
        "render_stream",
        str(FIXTURES / "gemini.sse"),
        provider="gemini",
        fmt="markdown",
        stdout=out,
    )
    assert out.getvalue() == (FIXTURES / "gemini.md").read_text(encoding="utf-8")


def test_capture_events():
    transcript, events, malformed = read((FIXTURES / "gemini.sse").read_text(encoding="utf-8"))
    assert malformed == 0
    assert transcript.completed and not transcript.error
    assert [e.tool_arguments for e in events if isinstance(e, ActionEvent)] == [
        {"query": "Samsung 2nm order"}
    ]
    assert [c.title for c in transcript.tool_calls] == ["Samsung 2nm order"]
    # One citation per index in groundingChunkIndices: the second support cites two chunks.
    assert len(transcript.citations) == 4
    spans = {(c.start, c.end) for c in transcript.citations}
    answer = transcript.answer
    assert sorted(answer[s:e] for s, e in spans) == [
        "Analysts called it a turning point.",
        "Samsung's foundry unit won a 2nm order 🎉 from a US chip designer.",
        "株価 rose 4% on the news.",
    ]
    # The segment's text is the answer's own words: never a passage to check a claim against
    # (the site reads the cited page instead, citations/pages.py).
    assert all(c.passages == () for c in transcript.citations)
    assert transcript.citations[1].data["segment"]["text"] == "株価 rose 4% on the news."


# --- the adapter ----------------------------------------------------------------------------


def test_metadata_split_across_chunks_is_merged():
    body = "".join(
        sse(
            chunk("Ünïcode first. "),
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": "Second claim."}]},
                        "groundingMetadata": {
                            "webSearchQueries": ["one"],
                            "groundingChunks": [{"web": {"uri": "https://a.example/1"}}],
                            "groundingSupports": [
                                {"segment": {"endIndex": 16}, "groundingChunkIndices": [0]}
                            ],
                        },
                    }
                ]
            },
            {
                "candidates": [
                    {
                        "finishReason": "STOP",
                        "groundingMetadata": {
                            "webSearchQueries": ["one", "two"],
                            "groundingChunks": [
                                {"retrievedContext": {"uri": "https://b.example/2", "title": "B"}}
                            ],
                            "groundingSupports": [
                                {
                                    "segment": {"startIndex": 17, "endIndex": 30},
                                    "groundingChunkIndices": [0],
                                }
                            ],
                        },
                    }
                ]
            },
        )
    )
    transcript, _, _ = read(body)
    assert markdown(transcript) == (
        "Ünïcode first.[^1] Second claim.[^2]\n\n"
        "[^1]: [a.example](https://a.example/1)\n"
        "[^2]: [B](https://b.example/2)\n"
    )
    assert [c.title for c in transcript.tool_calls] == ["one", "two"]
    assert transcript.citations[1].source.type == "DOCUMENT"


def test_supports_without_their_own_chunks_index_every_chunk_so_far():
    body = "".join(
        sse(
            chunk(
                "A.",
                groundingMetadata={"groundingChunks": [{"web": {"uri": "https://a.example/"}}]},
            ),
            chunk(
                " B.",
                finishReason="STOP",
                groundingMetadata={
                    "groundingSupports": [
                        {"segment": {"startIndex": 3, "endIndex": 5}, "groundingChunkIndices": [0]}
                    ]
                },
            ),
        )
    )
    assert markdown(read(body)[0]) == "A. B.[^1]\n\n[^1]: [a.example](https://a.example/)\n"


def test_repeated_metadata_does_not_duplicate_citations():
    metadata = {
        "groundingChunks": [{"web": {"uri": "https://a.example/", "title": "A"}}],
        "groundingSupports": [{"segment": {"endIndex": 2}, "groundingChunkIndices": [0]}],
    }
    body = "".join(
        sse(
            chunk("A.", groundingMetadata=metadata),
            chunk("", finishReason="STOP", groundingMetadata=metadata),
        )
    )
    assert len(read(body)[0].citations) == 1


def test_unknown_chunk_index_and_later_part_are_refused_not_misplaced():
    body = "".join(
        sse(
            chunk(
                "Claim.",
                finishReason="STOP",
                groundingMetadata={
                    "groundingChunks": [{"web": {"uri": "https://a.example/"}}],
                    "groundingSupports": [
                        {"segment": {"endIndex": 6}, "groundingChunkIndices": [0, 5]},
                        {
                            "segment": {"partIndex": 1, "endIndex": 3},
                            "groundingChunkIndices": [0],
                        },
                        {"segment": {"endIndex": 60}, "groundingChunkIndices": [0]},
                    ],
                },
            )
        )
    )
    transcript = read(body)[0]
    cited = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert [r.problem for r in cited.invalid_references] == [
        "no grounding chunk 5",
        "segment is in part 1; only part 0 is the answer",
        "end 60 is beyond the answer (6 characters)",
    ]
    assert render_markdown(cited).startswith("Claim.[^1]\n")


def test_a_byte_offset_inside_a_character_snaps_to_the_next_boundary():
    # "é" is 2 bytes, "🎉" 4: byte 3 is inside the emoji, byte 1 inside "é".
    body = "".join(
        sse(
            chunk(
                "é🎉 x",
                finishReason="STOP",
                groundingMetadata={
                    "groundingChunks": [{"web": {"uri": "https://a.example/"}}],
                    "groundingSupports": [
                        {"segment": {"startIndex": 1, "endIndex": 3}, "groundingChunkIndices": [0]}
                    ],
                },
            )
        )
    )
    citation = read(body)[0].citations[0]
    assert (citation.start, citation.end) == (1, 2)  # never half a character


def test_thought_parts_are_not_the_answer():
    document = {
        "candidates": [
            {
                "content": {"parts": [{"text": "thinking...", "thought": True}, {"text": "Hi."}]},
                "finishReason": "STOP",
            }
        ]
    }
    assert read("".join(sse(document)))[0].answer == "Hi."


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("SAFETY", "Gemini blocked this answer for safety reasons."),
        ("RECITATION", "Gemini stopped this answer because it was reciting a source too closely."),
        ("BLOCKLIST", "Gemini blocked this answer because it contained blocked terms."),
        ("PROHIBITED_CONTENT", "Gemini blocked this answer as prohibited content."),
        ("OTHER", "Gemini stopped this answer (OTHER)."),
    ],
)
def test_blocked_answer_is_an_error_and_not_complete(reason, message):
    transcript = read("".join(sse(chunk("Partial"), chunk("", finishReason=reason))))[0]
    assert transcript.error == message
    assert not transcript.completed
    assert transcript.answer == "Partial"


def test_blocked_question_is_an_error():
    body = "".join(sse({"promptFeedback": {"blockReason": "SAFETY"}}))
    transcript = read(body)[0]
    assert transcript.error == "Gemini blocked this question for safety reasons."
    assert not transcript.completed


def test_error_sent_mid_stream_is_an_error():
    body = "".join(sse(chunk("Part"), {"error": {"code": 500, "message": "Internal error"}}))
    transcript = read(body)[0]
    assert transcript.error == "Gemini reported an error: Internal error"


def test_stream_without_finish_reason_is_cut_not_complete():
    transcript, events, _ = read("".join(sse(chunk("An answer that stops"))))
    assert transcript.answer == "An answer that stops"
    assert not transcript.completed
    assert not any(isinstance(e, CompleteEvent) for e in events)


def test_usage_becomes_consumption_per_model():
    document = chunk("Hi.", finishReason="STOP")
    document["usageMetadata"] = {
        "promptTokenCount": 10,
        "candidatesTokenCount": 3,
        "cachedContentTokenCount": 4,
        "thoughtsTokenCount": 7,
    }
    transcript = read("".join(sse(chunk("", usageMetadata={}), document)))[0]
    assert transcript.consumption == [
        {
            "type": "gemini-2.5-flash",
            "input_tokens": 10,
            "output_tokens": 3,
            "cached_tokens": 4,
            "reasoning_tokens": 7,
        }
    ]


def test_other_documents_are_counted_as_malformed():
    _, events, malformed = read('data: {"message": {"type": "ANSWER"}}\n\ndata: [1]\n\n')
    assert (events, malformed) == ([], 2)


# --- the official SDK against the stand-in -----------------------------------------------------


@pytest.fixture
def gemini():
    app = GeminiStandIn()
    with serve_asgi(app) as url:
        app.url = url
        yield app


def client(url, request=None, *, notices=None, **config):
    config.setdefault("max_retries", 2)
    return GeminiClient(
        request or AgentRequest(message="What happened to Samsung?"),
        AgentSettings(api_key=KEY, url=url, model="gemini-test", **config),
        on_retry=(lambda m, d: _record(notices, m, d)) if notices is not None else None,
    )


async def _record(notices, message, delay):
    notices.append((message, delay))


async def collect(stream_client):
    return Transcript.from_events([e async for e in stream_client.events()])


SENTENCES = ["株価 rose 4% 📈. ", "Analysts 👩‍💻 were pleased. ", "Café owners agreed."]
SOURCES = [("https://www.koreaherald.example/a", ""), ("https://nikkei.example/b", "Nikkei")]


async def test_sdk_streams_a_grounded_answer_whose_citations_resolve_exactly(gemini):
    gemini.queue(stream(*grounded_answer(SENTENCES, SOURCES, pieces=5)))
    transcript = await collect(client(gemini.url))
    assert transcript.completed
    assert markdown(transcript) == (
        "株価 rose 4% 📈.[^1] Analysts 👩‍💻 were pleased.[^2] Café owners agreed.[^1]\n\n"
        "[^1]: [koreaherald.example](https://www.koreaherald.example/a)\n"
        "[^2]: [Nikkei](https://nikkei.example/b)\n"
    )
    assert transcript.consumption[0]["input_tokens"] == 12
    (request,) = gemini.requests
    assert request.path == "/v1beta/models/gemini-test:streamGenerateContent"
    assert request.query == "alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
    assert request.json["tools"] == [{"googleSearch": {}}]
    assert request.json["contents"] == [
        {"role": "user", "parts": [{"text": "What happened to Samsung?"}]}
    ]


async def test_follow_up_sends_the_branch_history(gemini):
    gemini.queue(stream(chunk("Yes.", finishReason="STOP")))
    request = AgentRequest(
        message="And Intel?",
        history=(
            ConversationTurn("What happened to Samsung?", "It won an order."),
            ConversationTurn("Was it big?", ""),
        ),
    )
    await collect(client(gemini.url, request))
    assert gemini.payloads[0]["contents"] == [
        {"role": "user", "parts": [{"text": "What happened to Samsung?"}]},
        {"role": "model", "parts": [{"text": "It won an order."}]},
        {"role": "user", "parts": [{"text": "Was it big?"}]},
        {"role": "user", "parts": [{"text": "And Intel?"}]},
    ]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (error(401, f"bad key {KEY}"), "Gemini did not accept the API key (check GEMINI_API_KEY)."),
        (error(403, "denied"), "Gemini did not accept the API key (check GEMINI_API_KEY)."),
        (
            Reply(
                status=400,
                body=[
                    json.dumps(
                        {
                            "error": {
                                "code": 400,
                                "message": "API key not valid. Please pass a valid API key.",
                                "status": "INVALID_ARGUMENT",
                                "details": [{"reason": "API_KEY_INVALID"}],
                            }
                        }
                    )
                ],
            ),
            "Gemini did not accept the API key (check GEMINI_API_KEY).",
        ),
        (
            error(400, f"Bad contents; key={KEY}"),
            "Gemini rejected the request: Bad contents; key=[redacted].",
        ),
        (
            error(404, "models/gemini-test is not found"),
            "Gemini could not find the model (check GEMINI_MODEL): "
            "models/gemini-test is not found.",
        ),
    ],
)
async def test_refusals_become_clear_errors_without_the_key(gemini, caplog, reply, message):
    caplog.set_level(logging.DEBUG)
    gemini.queue(reply)
    with pytest.raises(AgentError) as failure:
        await collect(client(gemini.url))
    assert failure.value.user_message == message
    assert failure.value.kind == "http"
    assert len(gemini.requests) == 1  # not retried
    assert KEY not in str(failure.value)
    assert KEY not in caplog.text


async def test_429_is_retried_after_retry_after_then_answers(gemini):
    gemini.queue(
        error(429, "Resource exhausted", **{"Retry-After": "0.2"}),
        stream(chunk("Fine.", finishReason="STOP")),
    )
    notices = []
    transcript = await collect(client(gemini.url, notices=notices))
    assert transcript.answer == "Fine." and transcript.completed
    assert notices == [
        ("Gemini is rate limiting requests; retried and gave up: Resource exhausted.", 0.2)
    ]
    assert len(gemini.requests) == 2


async def test_429_gives_up_after_the_retries(gemini):
    gemini.queue(*(error(429, "Resource exhausted", **{"Retry-After": "0"}) for _ in range(3)))
    with pytest.raises(AgentError) as failure:
        await collect(client(gemini.url, max_retries=2))
    assert failure.value.status == 429
    assert "rate limiting" in failure.value.user_message
    assert len(gemini.requests) == 3


async def test_5xx_is_retried(gemini):
    gemini.queue(error(503, "The model is overloaded."), stream(chunk("Ok.", finishReason="STOP")))
    transcript = await collect(client(gemini.url))
    assert transcript.completed and len(gemini.requests) == 2


async def test_unreachable():
    with pytest.raises(AgentError) as failure:
        await collect(client(f"http://127.0.0.1:{free_port()}", max_retries=0))
    assert failure.value.kind == "unreachable"
    assert failure.value.user_message.startswith("Could not reach Gemini at 127.0.0.1:")


async def test_stall_ends_the_answer(gemini):
    gemini.queue(Reply(body=[*sse(chunk("Part of")), Sleep(2)]))
    events = []
    with pytest.raises(AgentError) as failure:
        async for event in client(gemini.url, idle_timeout=0.3).events():
            events.append(event)
    assert failure.value.kind == "stalled"
    assert failure.value.user_message == "Gemini sent nothing for 0.3 s, so the answer was cut off."
    assert Transcript.from_events(events).answer == "Part of"
    assert len(gemini.requests) == 1  # never retried once text has flowed


async def test_drop_mid_answer(gemini):
    gemini.queue(Reply(body=[*sse(chunk("Part of")), Drop()]))
    with pytest.raises(AgentError) as failure:
        await collect(client(gemini.url))
    assert failure.value.kind == "dropped"
    assert failure.value.user_message == "The connection to Gemini dropped mid-answer."
    assert len(gemini.requests) == 1


async def test_cut_stream_is_not_complete(gemini):
    gemini.queue(stream(chunk("Half an answer")))
    transcript = await collect(client(gemini.url))
    assert transcript.answer == "Half an answer"
    assert not transcript.completed and not transcript.error


async def test_safety_block_through_the_sdk(gemini):
    gemini.queue(stream(chunk("Some"), chunk("", finishReason="SAFETY")))
    events = [e async for e in client(gemini.url).events()]
    assert [e.error for e in events if isinstance(e, ErrorEvent)] == [
        "Gemini blocked this answer for safety reasons."
    ]


def test_settings(settings):
    settings.GEMINI_API_KEY = ""
    assert PROVIDERS["gemini"].settings() is None
    settings.GEMINI_API_KEY = KEY
    settings.GEMINI_MODEL = "gemini-x"
    config = PROVIDERS["gemini"].settings()
    assert (config.model, config.api_key) == ("gemini-x", KEY)
    assert KEY not in repr(config)


async def test_error_sent_mid_stream_through_the_sdk(gemini):
    gemini.queue(
        stream(chunk("Part"), {"error": {"code": 500, "message": "Internal", "status": "INTERNAL"}})
    )
    events = []
    with pytest.raises(AgentError) as failure:
        async for event in client(gemini.url).events():
            events.append(event)
    assert failure.value.user_message == "Gemini failed (HTTP 500): Internal."
    assert Transcript.from_events(events).answer == "Part"
    assert len(gemini.requests) == 1  # text had flowed: not retried


def test_metadata_of_the_wrong_shape_is_ignored():
    body = "".join(
        sse(
            chunk(
                "Hi.",
                finishReason="STOP",
                groundingMetadata={
                    "webSearchQueries": "not a list",
                    "groundingChunks": {"web": {}},
                    "groundingSupports": [None, {"segment": "x", "groundingChunkIndices": "0"}],
                },
            )
        )
    )
    transcript = read(body)[0]
    assert (transcript.answer, transcript.citations, transcript.tool_calls) == ("Hi.", [], [])
    assert transcript.completed


async def test_the_key_is_not_logged_on_an_answered_run(gemini, caplog):
    caplog.set_level(logging.DEBUG)
    gemini.queue(error(503, f"overloaded for {KEY}"), stream(chunk("Fine.", finishReason="STOP")))
    notices = []
    assert (await collect(client(gemini.url, notices=notices))).completed
    assert KEY not in caplog.text and KEY not in str(notices)
    assert gemini.requests[1].headers["x-goog-api-key"] == KEY


def test_a_stored_run_reads_back_to_the_same_cited_answer():
    """What the event log stores (`event.data`) renders exactly as the live events did."""
    _, events, _ = read((FIXTURES / "gemini.sse").read_text(encoding="utf-8"))
    stored = json.loads(json.dumps([e.data for e in events]))
    assert markdown(Transcript.from_log(stored)) == (FIXTURES / "gemini.md").read_text(
        encoding="utf-8"
    )


# --- a malformed citation costs that citation only; retrieved documents' own text ------------


@pytest.mark.parametrize("bad_offset", [12.5, "twelve", -3])
async def test_a_non_integer_offset_drops_that_citation_not_the_turn(gemini, bad_offset):
    documents = grounded_answer(SENTENCES, SOURCES, pieces=3)
    last = documents[-1]["candidates"][0]
    supports = last["groundingMetadata"]["groundingSupports"]
    supports[1]["segment"]["startIndex"] = bad_offset
    supports.append({"segment": {"endIndex": 4}})  # no groundingChunkIndices: cites nothing
    gemini.queue(stream(*documents))
    transcript = await collect(client(gemini.url))
    assert transcript.completed and not transcript.failed
    assert transcript.answer == "".join(SENTENCES)  # the last chunk's text is kept
    result = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert [r.problem for r in result.invalid_references] == ["segment offsets are not integers"]
    assert markdown(transcript) == (
        "株価 rose 4% 📈.[^1] Analysts 👩‍💻 were pleased. Café owners agreed.[^1]\n\n"
        "[^1]: [koreaherald.example](https://www.koreaherald.example/a)\n"
    )


FILE_CHUNKS = [
    {
        "retrievedContext": {
            "title": "Q3 shareholder letter",
            "text": "Revenue grew 12% to $4.1 billion in the third quarter.",
            "fileSearchStore": "fileSearchStores/letters-1",
        }
    },
    {
        "retrievedContext": {
            "uri": "gs://filings/annual-2025.pdf",
            "text": "Gross margin was 31%.",
        }
    },
]


async def test_file_search_chunks_are_their_own_passage_and_named_by_their_title(gemini):
    answer = "Revenue grew 12%. Margin was 31%."
    last = chunk(answer, finishReason="STOP")
    last["candidates"][0]["groundingMetadata"] = {
        "groundingChunks": FILE_CHUNKS,
        "groundingSupports": [
            {
                "segment": {"endIndex": 17, "text": "Revenue grew 12%."},
                "groundingChunkIndices": [0],
            },
            {
                "segment": {"startIndex": 18, "endIndex": 33, "text": "Margin was 31%."},
                "groundingChunkIndices": [1],
            },
        ],
    }
    gemini.queue(stream(last))
    transcript = await collect(client(gemini.url))
    result = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert [(s.label, s.type) for s in result.sources] == [
        ("Q3 shareholder letter", "DOCUMENT"),
        ("annual-2025.pdf", "DOCUMENT"),
    ]
    assert [[p.text for _, ps in c.passages for p in ps] for c in result.claims] == [
        ["Revenue grew 12% to $4.1 billion in the third quarter."],
        ["Gross margin was 31%."],
    ]
