"""Helpers for the citation tests: resolving captures, building references, reading HTML."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from chats.agent.providers import bigdata as bigdata_adapter
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn
from citations.resolve import CitedAnswer, resolve_citations


def cited_from_capture(path: Path) -> CitedAnswer:
    events, _ = parse_sse_text(path.read_text(encoding="utf-8"), bigdata_adapter.BigdataAdapter())
    transcript = Transcript.from_events(events)
    return resolve_citations(
        answer=transcript.answer, citations=transcript.citations, tool_calls=transcript.tool_calls
    )


def bigdata(doc_id: str, **fields: Any) -> dict[str, Any]:
    source = {
        "type": "BIGDATA",
        "id": doc_id,
        "hd": f"Headline {doc_id}",
        "src_name": "Reuters",
        "ts": "2026-04-16T09:30:00Z",
        "url": f"https://news.example/{doc_id}",
    }
    source.update(fields)
    return {key: value for key, value in source.items() if value is not None}


def ref(start: Any, end: Any, source: Any = None, **fields: Any) -> dict[str, Any]:
    return {"start": start, "end": end, "tool_name": "search", "audit_id": "a-1",
            "source": source, **fields}  # fmt: skip


def cite(answer: str, *references: Any, traces: list[Any] | None = None) -> CitedAnswer:
    """Resolve Bigdata-shaped references and traces, read by the Bigdata adapter."""
    return resolve_citations(
        answer=answer,
        citations=[bigdata_adapter.citation(r) for r in references],
        tool_calls=[bigdata_adapter.tool_call(t) for t in traces or []],
    )


class Element:
    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag, self.attrs = tag, attrs


class ParsedHtml(HTMLParser):
    """Every element with its attributes, and the text, as a browser would read them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.text_parts: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text_parts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def find(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e for e in self.elements
            if e.tag == tag and all(e.attrs.get(k.rstrip("_")) == v for k, v in attrs.items())
        ]  # fmt: skip

    @property
    def ids(self) -> list[str]:
        return [e.attrs["id"] for e in self.elements if e.attrs.get("id")]

    @property
    def hrefs(self) -> list[str]:
        return [e.attrs["href"] or "" for e in self.elements if "href" in e.attrs]


@pytest.fixture
def chat(django_user_model) -> Chat:
    owner = django_user_model.objects.create_user("analyst", password="pw-analyst-123")
    return Chat.objects.create(owner=owner, title="Earnings")


@pytest.fixture
def make_turn(chat):
    def make(question: str = "How did NVIDIA do?", answer: str = "", **fields: Any) -> Turn:
        return Turn.objects.create(
            chat=chat, question=question, answer_text=answer, status=Turn.Status.COMPLETE, **fields
        )

    return make
