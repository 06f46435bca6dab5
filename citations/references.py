"""The core's typed inputs: what every provider's adapter turns its citations into.

A `Citation` ties a span of the answer (offsets in code points, end exclusive) to a
`SourceDocument`, or to nothing (a tool-level attribution: the span rests on a tool call's whole
result; docs/PROTOCOL.md, "GROUNDING"). Adapters build these from their wire format; past the
adapter nobody reads upstream JSON. `data` fields keep what was received, for the log and the admin,
and are never interpreted by the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from citations.sources import bounded_key, http_url, source_label, url_host


@dataclass(frozen=True, slots=True)
class Passage:
    """Text of the source that supports the claim (a Bigdata chunk, Anthropic's cited_text...).

    `page_url` and `fetched_on` are set when the site took the passage from the cited page it
    fetched itself (`citations.pages`), rather than from what the agent sent.
    """

    text: str
    relevance: float | None = None
    page_url: str = ""
    fetched_on: date | None = None

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"text": self.text, "relevance": self.relevance}
        if self.fetched_on is not None:
            data["page_url"] = self.page_url
            data["fetched_on"] = self.fetched_on.isoformat()
        return data

    @classmethod
    def from_data(cls, data: Any) -> Passage | None:
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            return None
        relevance = data.get("relevance")
        number = isinstance(relevance, int | float) and not isinstance(relevance, bool)
        return cls(
            text=data["text"],
            relevance=float(relevance) if number else None,
            page_url=str(data.get("page_url") or ""),
            fetched_on=_date(data.get("fetched_on")),
        )


@dataclass(frozen=True, slots=True)
class PageRead:
    """What the site made of a cited web page whose citation carried no passage.

    `pending` while the page is being fetched; then either `text` (its main text, kept only
    while passages are chosen, never stored with a turn) or `problem`, one line saying why it
    could not be read ("HTTP 404", "refused: a private address"...). `final_url` is where its
    redirects ended.
    """

    url: str
    final_url: str = ""
    fetched_on: date | None = None
    problem: str = ""
    pending: bool = False
    text: str = field(default="", repr=False, compare=False)

    @property
    def is_read(self) -> bool:
        """Its main text is at hand, to choose passages from."""
        return not self.pending and not self.problem and bool(self.text.strip())

    @property
    def was_read(self) -> bool:
        """It was fetched and read (its text may since have been dropped)."""
        return not self.pending and not self.problem and self.fetched_on is not None

    def to_data(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "final_url": self.final_url,
            "fetched_on": _iso(self.fetched_on),
            "problem": self.problem,
            "pending": self.pending,
        }

    @classmethod
    def from_data(cls, data: Any) -> PageRead | None:
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            return None
        return cls(
            url=data["url"],
            final_url=str(data.get("final_url") or ""),
            fetched_on=_date(data.get("fetched_on")),
            problem=str(data.get("problem") or ""),
            pending=data.get("pending") is True,
        )


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document or web page, as its provider describes it.

    `key` is the deduplication key the adapter chose (never a tool call id: one call returns
    many documents). `url` is already safe to link (`sources.http_url`) or "".
    """

    key: str
    type: str  # BIGDATA, EXTERNAL, WEB, DOCUMENT or OTHER
    name: str  # the outlet or site; the label falls back to it
    headline: str = ""
    url: str = ""
    published_on: date | None = None
    data: Any = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        """The footnote's text: "Name - YYYY-MM-DD", or the name alone (docs/PROTOCOL.md,
        "GROUNDING")."""
        return source_label(self.name, self.published_on)

    def to_data(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "type": self.type,
            "name": self.name,
            "headline": self.headline,
            "url": self.url,
            "published_on": _iso(self.published_on),
            "data": self.data,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> SourceDocument:
        published = data.get("published_on")
        return cls(
            key=str(data.get("key") or ""),
            type=str(data.get("type") or "OTHER"),
            name=str(data.get("name") or ""),
            headline=str(data.get("headline") or ""),
            url=str(data.get("url") or ""),
            published_on=date.fromisoformat(published) if isinstance(published, str) else None,
            data=data.get("data"),
        )


@dataclass(frozen=True, slots=True)
class Citation:
    """One claim of the answer and what supports it, as the provider sent it.

    `problem` is set by the adapter when the reference could not be read at all ("not an
    object"); whether the span fits the answer is judged later, by `resolve`, against the
    whole answer. `audit_ids` are the tool-call ids the reference names, in order of trust.

    An `unplaced` citation names a source for the answer as a whole, with no span (xAI's
    `url_citation` annotations when its inline citations are off): it has no marker in the
    text, and its source is listed in Sources as not placed in the text.
    """

    start: int | None
    end: int | None
    source: SourceDocument | None
    tool_name: str = ""
    audit_ids: tuple[str, ...] = ()
    passages: tuple[Passage, ...] = ()
    problem: str = ""
    data: Any = field(default=None, compare=False, repr=False)
    unplaced: bool = False

    def to_data(self) -> dict[str, Any]:
        return {
            **({"unplaced": True} if self.unplaced else {}),
            "start": self.start,
            "end": self.end,
            "source": self.source.to_data() if self.source else None,
            "tool_name": self.tool_name,
            "audit_ids": list(self.audit_ids),
            "passages": [p.to_data() for p in self.passages],
            "problem": self.problem,
            "data": self.data,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Citation:
        source = data.get("source")
        return cls(
            start=_int(data.get("start")),
            end=_int(data.get("end")),
            source=SourceDocument.from_data(source) if isinstance(source, dict) else None,
            tool_name=str(data.get("tool_name") or ""),
            audit_ids=tuple(str(a) for a in _list(data.get("audit_ids"))),
            passages=tuple(
                p for item in _list(data.get("passages")) if (p := Passage.from_data(item))
            ),
            problem=str(data.get("problem") or ""),
            data=data.get("data"),
            unplaced=data.get("unplaced") is True,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the agent made (a Bigdata AUDIT trace, a web search), in arrival order.

    Tool-level citations name it through `Citation.audit_ids`; `results` are the documents it
    retrieved, cited or not.
    """

    tool_id: str
    kind: str  # the audit type ("SearchAuditV1") or the provider's tool name
    title: str  # the search query or the trace's title, on one line
    results: tuple[SourceDocument, ...] = ()
    data: Any = field(default=None, compare=False, repr=False)

    @property
    def result_headlines(self) -> list[str]:
        return [r.headline for r in self.results if r.headline]

    def to_data(self) -> dict[str, Any]:
        return {
            "tool_id": self.tool_id,
            "kind": self.kind,
            "title": self.title,
            "results": [r.to_data() for r in self.results],
            "data": self.data,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ToolCall:
        return cls(
            tool_id=str(data.get("tool_id") or ""),
            kind=str(data.get("kind") or ""),
            title=str(data.get("title") or ""),
            results=tuple(
                SourceDocument.from_data(r)
                for r in _list(data.get("results"))
                if isinstance(r, dict)
            ),
            data=data.get("data"),
        )


def web_source(
    url: Any, headline: str, *, data: Any, published_on: date | None = None
) -> SourceDocument | None:
    """A web page an agent cited, keyed by its link (or its raw URL when that is not http(s))
    and named by its headline or else its site; None when the URL cannot make a key."""
    link = http_url(url)
    key = bounded_key("url", link or url)
    if key is None:
        return None
    return SourceDocument(
        key=key,
        type="WEB",
        name=headline or url_host(link) or "Source",
        headline=headline,
        url=link,
        published_on=published_on,
        data=data,
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _iso(day: date | None) -> str | None:
    return day.isoformat() if day else None


def _date(value: Any) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
