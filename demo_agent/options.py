"""The request options the demo agent honours (docs/PROTOCOL.md, "Request", `tools_configs`):
model tier, search period and entity filters, expected output and a structured output schema.

Read here, applied by `ResearchTurn` through `SearchScope.admits`, `AnswerShape` and
`structured_output`, so the research pipeline itself keeps one code path for every request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from demo_agent.corpus import Company, Corpus, Document
from demo_agent.errors import HttpError

MODELS = ("base", "pro")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class RequestOptions:
    model_name: str = "base"
    expected_output: str = ""
    period_start: str = ""  # ISO date prefixes, compared with a document's `ts`
    period_end: str = ""
    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()
    schema: dict[str, Any] | None = None

    @property
    def pro(self) -> bool:
        return self.model_name == "pro"


def parse_options(data: dict[str, Any]) -> RequestOptions:
    """Return the options of a request body, or raise HttpError 422 for a wrong shape."""
    model = data.get("model_name") or "base"
    if model not in MODELS:
        raise HttpError(422, [_error("model_name", "Input should be 'base' or 'pro'")])
    expected = data.get("expected_output") or ""
    if not isinstance(expected, str):
        raise HttpError(422, [_error("expected_output", "Input should be a valid string")])
    schema = data.get("structured_output_schema")
    if schema is not None and not (isinstance(schema, dict) and _top_level_ok(schema)):
        raise HttpError(
            422, [_error("structured_output_schema", "Top level must be an object or a list")]
        )
    filters = _dict(_dict(_dict(data.get("tools_configs")).get("search")).get("query_filters"))
    period = _dict(filters.get("period"))
    entities = _dict(filters.get("entities"))
    return RequestOptions(
        model_name=model,
        expected_output=expected,
        period_start=_text(period.get("start")),
        period_end=_text(period.get("end")),
        all_of=_names(entities.get("all_of")),
        any_of=_names(entities.get("any_of")),
        none_of=_names(entities.get("none_of")),
        schema=schema,
    )


def _top_level_ok(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "object":
        return True
    items = schema.get("items")
    return (
        schema.get("type") == "array" and isinstance(items, dict) and items.get("type") == "object"
    )


def _error(field: str, msg: str) -> dict[str, Any]:
    return {"loc": ["body", field], "msg": msg, "type": "value_error"}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _names(value: Any) -> tuple[str, ...]:
    return (
        tuple(v.strip().lower() for v in value if isinstance(v, str))
        if isinstance(value, list)
        else ()
    )


# --- Search scope ---------------------------------------------------------------------------


class SearchScope:
    """Which documents a search may return: the period and the entity filters."""

    def __init__(self, options: RequestOptions, corpus: Corpus) -> None:
        self._options = options
        self._corpus = corpus

    def admits(self, document: Document) -> bool:
        day = str(document.source.get("ts", ""))[:10]
        if self._options.period_start and day < self._options.period_start[:10]:
            return False
        if self._options.period_end and day > self._options.period_end[:10]:
            return False
        company = self._corpus.company(document.company) if document.company else None
        named = _names_of(company)
        if self._options.none_of and named & set(self._options.none_of):
            return False
        # A document is about one company here, so "all of" two companies admits none of them.
        if self._options.all_of and not set(self._options.all_of) <= named:
            return False
        return not (self._options.any_of and not named & set(self._options.any_of))


def _names_of(company: Company | None) -> set[str]:
    if company is None:
        return set()
    return {company.key, company.name.lower(), *company.aliases}


# --- Answer shape ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerShape:
    bullets: bool | None  # None: as the research effort decides
    max_claims_delta: int
    note: str  # a closing line, "" for none


def answer_shape(options: RequestOptions) -> AnswerShape:
    """Return how the expected output and the model tier shape the answer."""
    wanted = options.expected_output.lower()
    bullets = True if re.search(r"bullet|list", wanted) else None
    if re.search(r"paragraph|prose", wanted):
        bullets = False
    brief = bool(re.search(r"brief|short|one sentence|concise", wanted))
    delta = (-3 if brief else 0) + (2 if options.pro else 0)
    note = "Answered by the pro model, which reads more of the corpus." if options.pro else ""
    return AnswerShape(bullets=bullets, max_claims_delta=delta, note=note)


# --- Structured output ----------------------------------------------------------------------


def facts_of(document_keys: tuple[str, ...], corpus: Corpus) -> list[tuple[Document, str]]:
    """Return each cited document with its first sentence that carries a figure."""
    by_key = {d.key: d for d in corpus.documents}
    facts = []
    for key in document_keys:
        document = by_key.get(key)
        if document is not None and document.sentences:
            figured = (s for s in document.sentences if _NUMBER.search(s))
            facts.append((document, next(figured, document.sentences[0])))
    return facts


def structured_output(
    schema: dict[str, Any], facts: list[tuple[Document, str]], corpus: Corpus
) -> Any:
    """Return a value following `schema`, filled from the cited sentences (`facts`)."""
    if schema.get("type") == "array":
        rows = [_fill(schema["items"], [fact], corpus) for fact in facts] or [
            _fill(schema["items"], [], corpus)
        ]
        return rows[: schema.get("maxItems") or len(rows)]
    return _fill(schema, facts, corpus)


def _fill(schema: dict[str, Any], facts: list[tuple[Document, str]], corpus: Corpus) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        properties = _dict(schema.get("properties"))
        return {
            name: _property(name, _dict(sub), facts, corpus) for name, sub in properties.items()
        }
    if kind == "array":
        item = _dict(schema.get("items"))
        return [_fill(item, [fact], corpus) for fact in facts[:3]] if item else []
    return _scalar(kind, "", facts, corpus)


def _property(
    name: str, schema: dict[str, Any], facts: list[tuple[Document, str]], corpus: Corpus
) -> Any:
    kind = schema.get("type")
    if kind in ("object", "array") or "enum" in schema:
        return _fill(schema, facts, corpus)
    return _scalar(kind, name.lower(), facts, corpus)


def _scalar(kind: Any, name: str, facts: list[tuple[Document, str]], corpus: Corpus) -> Any:
    document, sentence = facts[0] if facts else (None, "")
    if kind in ("number", "integer"):
        numbers = [float(n.replace(",", "")) for _, s in facts for n in _NUMBER.findall(s)]
        value = numbers[0] if numbers else 0
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return bool(facts)
    if kind == "null":
        return None
    if document is None:
        return ""
    if "company" in name or name in ("name", "entity"):
        company = corpus.company(document.company) if document.company else None
        return company.name if company else "Markets"
    if "source" in name or "outlet" in name:
        return document.outlet
    if "date" in name:
        return str(document.source.get("ts", ""))[:10]
    if "headline" in name or "title" in name:
        return document.headline
    return sentence
