"""Research Agent bodies with very many references, in the shape the agent sends them.

A GROUNDING message's references each carry a span, the tool and its audit id, and a BIGDATA
source (`id`, `hd`, `src_name`, `src_key`, `ts`, `url`, `source_rank`), optionally with the
passage it contributed (`chunks[{cnum, text, relevance, sentiment}]`), as docs/PROTOCOL.md
describes them. Used to size AGENT_MAX_LINE_BYTES and to test that nothing of them is lost.
"""

from __future__ import annotations

import json

SENTENCE = "Data center revenue rose 12% to $4.1 billion in quarter {n}."
PASSAGE = (
    "In the quarter, data center revenue rose 12% to $4.1 billion, driven by demand for "
    "accelerated computing from cloud providers and enterprises; the company said supply "
    "constraints eased and guided to sequential growth in quarter {n}, citing new systems."
)


def answer_text(references: int) -> str:
    """One sentence per reference, each cited by it."""
    return " ".join(SENTENCE.format(n=n) for n in range(references))


def references(count: int, *, passages: bool = False, sources: int | None = None) -> list:
    """`count` references, one per sentence of `answer_text(count)`, over `sources` documents
    (one each by default)."""
    sources = sources or count
    items, position = [], 0
    for n in range(count):
        sentence = SENTENCE.format(n=n)
        doc = n % sources
        source = {
            "type": "BIGDATA",
            "id": f"{doc:08X}F1E2D3C4B5A6978800112233",
            "hd": f"Chipmaker's data center sales climb as cloud demand holds, part {doc}",
            "src_name": "Dow Jones Newswires",
            "src_key": f"{doc % 997:06X}",
            "ts": f"2026-0{doc % 9 + 1}-{doc % 28 + 1:02d}T14:32:00Z",
            "url": f"https://www.example-news.com/articles/chip-data-center-{doc}",
            "source_rank": doc % 50 + 1,
        }
        if passages:
            source["chunks"] = [
                {"cnum": 3, "text": PASSAGE.format(n=n), "relevance": 0.87, "sentiment": 0.12}
            ]
        items.append(
            {
                "start": position,
                "end": position + len(sentence),
                "tool_name": "search",
                "audit_id": f"audit-{n % 40}",
                "source": source,
            }
        )
        position += len(sentence) + 1
    return items


def grounding_line(count: int, *, passages: bool = False, sources: int | None = None) -> str:
    """The `data:` line of one GROUNDING event carrying `count` references."""
    message = {
        "type": "GROUNDING",
        "references": references(count, passages=passages, sources=sources),
    }
    return "data: " + json.dumps({"chat_id": "chat-big", "message": message}) + "\n\n"


def answer_body(count: int, *, passages: bool = False) -> str:
    """A whole Research Agent body: the answer, its one big GROUNDING event, COMPLETE."""
    answer = {"chat_id": "chat-big", "message": {"type": "ANSWER", "content": answer_text(count)}}
    complete = {"chat_id": "chat-big", "message": {"type": "COMPLETE", "checkpoint_id": "cp-1"}}
    return (
        f"data: {json.dumps(answer)}\n\n"
        + grounding_line(count, passages=passages)
        + f"data: {json.dumps(complete)}\n\n"
    )
