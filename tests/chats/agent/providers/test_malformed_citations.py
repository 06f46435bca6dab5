"""One malformed citation costs that citation, never the turn, with every provider's adapter.

Each body, in the provider's documented wire shape, carries a good citation and one whose
offset, index or type is malformed (a string, a fraction, a list, an object, missing). The
answer must arrive whole and complete, the good citation must be shown, and the bad one must be
kept as an invalid reference (which the turn's notice counts), not raise.
"""

from __future__ import annotations

import json

import pytest

from chats.agent.providers.formats import STREAM_FORMATS
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from citations.render import render_markdown
from citations.resolve import resolve_citations

ANSWER = "Sales rose 4%. Costs fell."
BAD_VALUES = ["12", 2.5, [], {}, True]
MISSING = object()


def sse(document, event=None):
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(document)}\n\n"


def _with(mapping, key, value):
    copy = dict(mapping)
    if value is MISSING:
        copy.pop(key, None)
    else:
        copy[key] = value
    return copy


def gemini(bad):
    good = {"segment": {"endIndex": 14}, "groundingChunkIndices": [0]}
    broken = {"segment": {"startIndex": bad, "endIndex": 26}, "groundingChunkIndices": [1]}
    if bad is MISSING:  # an index naming no grounding chunk
        broken = {"segment": {"startIndex": 15, "endIndex": 26}, "groundingChunkIndices": [9]}
    candidate = {
        "content": {"role": "model", "parts": [{"text": ANSWER}]},
        "finishReason": "STOP",
        "groundingMetadata": {
            "groundingChunks": [
                {"web": {"uri": "https://good.example/", "title": "Good"}},
                {"web": {"uri": "https://bad.example/", "title": "Bad"}},
            ],
            "groundingSupports": [good, broken],
        },
    }
    return sse({"candidates": [candidate]})


def responses(flavour):
    def body(bad):
        good = {
            "type": "url_citation",
            "url": "https://good.example/",
            "title": "Good",
            "start_index": 0,
            "end_index": 14,
        }
        broken = _with(
            {"type": "url_citation", "url": "https://bad.example/", "start_index": 15},
            "end_index",
            bad if bad is not MISSING else MISSING,
        )
        at = {"output_index": 0, "content_index": 0}
        message = {
            "type": "message",
            "content": [{"type": "output_text", "text": ANSWER, "annotations": [good, broken]}],
        }
        return "".join(
            [
                sse(
                    {"type": "response.output_text.delta", **at, "delta": ANSWER},
                    "response.output_text.delta",
                ),
                *(
                    sse(
                        {"type": "response.output_text.annotation.added", **at, "annotation": a},
                        "response.output_text.annotation.added",
                    )
                    for a in (good, broken)
                ),
                sse(
                    {"type": "response.completed", "response": {"id": "r", "output": [message]}},
                    "response.completed",
                ),
            ]
        )

    return body


def anthropic(bad):
    good = {
        "type": "web_search_result_location",
        "url": "https://good.example/",
        "title": "Good",
        "cited_text": "Sales rose 4%.",
    }
    broken = _with(good, "type", bad)  # a location type we cannot read
    lines = [
        sse(
            {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}},
            "message_start",
        )
    ]
    for index, (text, citation) in enumerate([("Sales rose 4%.", good), (" Costs fell.", broken)]):
        block = {"type": "text", "text": "", "citations": []}
        lines += [
            sse(
                {"type": "content_block_start", "index": index, "content_block": block},
                "content_block_start",
            ),
            sse(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "citations_delta", "citation": citation},
                },
                "content_block_delta",
            ),
            sse(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": text},
                },
                "content_block_delta",
            ),
            sse({"type": "content_block_stop", "index": index}, "content_block_stop"),
        ]
    lines += [
        sse(
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    return "".join(lines)


def llm_sdk(bad):
    good = {"source": "https://good.example/", "title": "Good", "cited_text": "Sales rose 4%."}
    # A source that is not a string, an empty one, or none.
    broken = _with({"title": "Bad"}, "source", "" if isinstance(bad, str) else bad)
    parts = [("Sales rose 4%.", good), (" Costs fell.", broken)]
    lines = [
        json.dumps({"delta": {"index": i, "part": {"type": "text", "text": t, "citation": c}}})
        for i, (t, c) in enumerate(parts)
    ]
    return "\n".join(lines) + "\n"


def bigdata(bad):
    def reference(start, end, n):
        source = {
            "type": "BIGDATA",
            "id": f"d{n}",
            "hd": f"Doc {n}",
            "src_name": "Wire",
            "url": f"https://doc.example/{n}",
        }
        return {
            "start": start,
            "end": end,
            "tool_name": "search",
            "audit_id": "a",
            "source": source,
        }

    broken = _with(reference(15, 26, 2), "end", bad)
    references = [reference(0, 14, 1), broken]
    return "".join(
        sse({"chat_id": "c", "message": m})
        for m in (
            {"type": "ANSWER", "content": ANSWER},
            {"type": "GROUNDING", "references": references},
            {"type": "COMPLETE", "checkpoint_id": "cp"},
        )
    )


BODIES = {
    "gemini": gemini,
    "openai": responses("openai"),
    "xai": responses("xai"),
    "anthropic": anthropic,
    "llm-sdk": llm_sdk,
    "bigdata": bigdata,
}


@pytest.mark.parametrize("bad", [*BAD_VALUES, MISSING], ids=[*map(repr, BAD_VALUES), "missing"])
@pytest.mark.parametrize("provider", sorted(BODIES))
def test_one_malformed_citation_drops_only_itself(provider, bad):
    stream_format = STREAM_FORMATS[provider]
    events, _ = parse_sse_text(
        BODIES[provider](bad), stream_format.adapter(), json_lines=stream_format.json_lines
    )
    transcript = Transcript.from_events(events)
    assert transcript.answer == ANSWER
    assert transcript.completed and not transcript.failed
    cited = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert len(cited.invalid_references) == 1
    assert render_markdown(cited).startswith("Sales rose 4%.[^1] Costs fell.\n\n[^1]: ")
    assert len(cited.sources) == 1
