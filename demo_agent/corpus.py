"""The bundled demo corpus (corpus.json): companies, documents and the earnings calendar.

All of it is fictional demo data; see the `notice` at the top of corpus.json.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

CORPUS_PATH = Path(__file__).with_name("corpus.json")

# The corpus is written without abbreviations such as "Inc." so that a sentence ends at the first
# ". " and a split on terminal punctuation is exact; test_corpus.py keeps that true.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Company:
    key: str
    name: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class CalendarEntry:
    company: str
    period: str
    date: str
    timing: str
    consensus_revenue: str
    consensus_eps: str


@dataclass(frozen=True)
class Document:
    """One article; `source` is the GROUNDING `source` object exactly as the wire carries it."""

    key: str
    company: str | None
    topic: str | None
    headline: str
    text: str
    source: dict[str, Any] = field(repr=False)
    sentences: tuple[str, ...] = field(repr=False)

    @property
    def outlet(self) -> str:
        return self.source.get("src_name") or self.source["action"]["name"]


@dataclass(frozen=True)
class Corpus:
    notice: str
    companies: tuple[Company, ...]
    documents: tuple[Document, ...]
    calendar: tuple[CalendarEntry, ...]

    def company(self, key: str) -> Company | None:
        return next((c for c in self.companies if c.key == key), None)

    def calendar_entry(self, company_key: str) -> CalendarEntry | None:
        return next((e for e in self.calendar if e.company == company_key), None)


def split_sentences(text: str) -> tuple[str, ...]:
    """Return the sentences of a document's text, exactly as they appear in it."""
    return tuple(s for s in _SENTENCE_END.split(text.strip()) if s)


@cache
def load_corpus(path: Path = CORPUS_PATH) -> Corpus:
    """Load and check corpus.json once per process."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    companies = tuple(
        Company(key=c["key"], name=c["name"], aliases=tuple(c["aliases"])) for c in raw["companies"]
    )
    return Corpus(
        notice=raw["notice"],
        companies=companies,
        documents=tuple(_document(d) for d in raw["documents"]),
        calendar=tuple(CalendarEntry(**entry) for entry in raw["earnings_calendar"]),
    )


def _document(raw: dict[str, Any]) -> Document:
    if raw["type"] == "BIGDATA":
        source = {"type": "BIGDATA", "id": raw["id"], "hd": raw["hd"], "src_name": raw["src_name"]}
        source["ts"] = raw["ts"]
        if "url" in raw:
            source["url"] = raw["url"]
    elif raw["type"] == "EXTERNAL":
        source = {"type": "EXTERNAL"}
        if "id" in raw:
            source["id"] = raw["id"]
        source |= {"hd": raw["hd"], "ts": raw["ts"], "action": dict(raw["action"])}
    else:
        raise ValueError(f"Unknown document type {raw['type']!r}")
    return Document(
        # External results without an id are keyed, like the client deduplicates them, by URL.
        key=raw.get("id") or raw["action"]["url"],
        company=raw.get("company"),
        topic=raw.get("topic"),
        headline=raw["hd"],
        text=raw["text"],
        source=source,
        sentences=split_sentences(raw["text"]),
    )
