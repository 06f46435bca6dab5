"""Property: Gemini's UTF-8 byte offsets put every marker exactly at its claim's end.

Multibyte text (CJK, emoji, ZWJ sequences, combining marks) before and inside the cited spans,
streamed in chunks cut at arbitrary code-point boundaries, with the grounding metadata on any
chunk: the adapter, the resolver and the Markdown renderer must put `[^n]` right after each
cited sentence, and nowhere else.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from chats.agent.providers.gemini import GeminiAdapter, _CodePointOffsets
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from citations.render import render_markdown
from citations.resolve import resolve_citations

# Whole "characters" as a reader sees them; several are many code points and many bytes.
ATOMS = [
    "a",
    "Z",
    "é",  # precomposed, 2 bytes
    "e\u0301",  # e + combining acute
    "a\u0308\u0323",  # two combining marks
    "株",
    "価",
    "한",
    "ß",
    "🎉",  # 4 bytes
    "👩\u200d💻",  # ZWJ sequence
    "👨\u200d👩\u200d👧\u200d👦",
    "🇰🇷",  # regional indicator pair
    "❤\ufe0f",  # variation selector
    "\u200b",  # zero-width space
]
word = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=6).map("".join)
# A sentence starts with a word (no leading space: that could make a code block) and ends with
# "." so the marker has one right place.
sentence = st.lists(word, min_size=1, max_size=4).map(lambda words: " ".join(words) + ".")
SOURCES = [f"https://site{n}.example/page" for n in range(3)]


@st.composite
def grounded_streams(draw):
    prefix = draw(st.one_of(st.just(""), sentence.map(lambda s: s + " ")))
    claims = draw(st.lists(sentence, min_size=1, max_size=5))
    cited = [draw(st.lists(st.integers(0, 2), max_size=2, unique=True)) for _ in claims]
    answer = prefix + " ".join(claims)
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(answer) - 1)), max_size=8)))
    pieces = [answer[a:b] for a, b in zip([0, *cuts], [*cuts, len(answer)], strict=True)]
    pieces = [p for p in pieces if p]
    metadata_on = draw(st.integers(0, len(pieces) - 1))
    return prefix, claims, cited, pieces, metadata_on


def body_of(prefix, claims, cited, pieces, metadata_on) -> str:
    supports, byte_at = [], len(prefix.encode())
    for claim, indices in zip(claims, cited, strict=True):
        start, end = byte_at, byte_at + len(claim.encode())
        byte_at = end + 1  # the space between sentences
        if indices:
            segment = {"endIndex": end, "text": claim}
            if start:  # omitted when 0, as Google's JSON does
                segment["startIndex"] = start
            supports.append({"segment": segment, "groundingChunkIndices": indices})
    lines = []
    for n, piece in enumerate(pieces):
        candidate = {"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}
        if n == metadata_on:
            candidate["groundingMetadata"] = {
                "groundingChunks": [{"web": {"uri": u}} for u in SOURCES],
                "groundingSupports": supports,
            }
        if n == len(pieces) - 1:
            candidate["finishReason"] = "STOP"
        lines.append(f"data: {json.dumps({'candidates': [candidate]}, ensure_ascii=False)}\r\n\r\n")
    return "".join(lines)


@settings(max_examples=150, deadline=None)
@given(grounded_streams())
def test_every_marker_sits_right_after_its_claim(stream):
    prefix, claims, cited, pieces, metadata_on = stream
    events, malformed = parse_sse_text(
        body_of(prefix, claims, cited, pieces, metadata_on), GeminiAdapter()
    )
    transcript = Transcript.from_events(events)
    assert malformed == 0 and transcript.completed
    cited_answer = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert not cited_answer.invalid_references

    numbers: dict[int, int] = {}  # source index → footnote, in reading order
    expected = [prefix]
    for n, (claim, indices) in enumerate(zip(claims, cited, strict=True)):
        for index in indices:
            numbers.setdefault(index, len(numbers) + 1)
        markers = "".join(f"[^{k}]" for k in sorted(numbers[i] for i in indices))
        expected.append(("" if n == 0 else " ") + claim + markers)
    body = render_markdown(cited_answer).split("\n\n[^")[0]
    assert body == "".join(expected)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=12).map("".join), st.data())
def test_a_byte_offset_maps_to_the_first_character_boundary_at_or_after_it(text, data):
    encoded = text.encode()
    byte_offset = data.draw(st.integers(0, len(encoded)))
    offset = _CodePointOffsets(text)(byte_offset)
    assert len(text[:offset].encode()) >= byte_offset  # never before the byte
    if offset:
        assert len(text[: offset - 1].encode()) < byte_offset  # and the first boundary past it
    # Past the end stays past the end, for the resolver to refuse.
    assert _CodePointOffsets(text)(len(encoded) + 3) == len(text) + 3
