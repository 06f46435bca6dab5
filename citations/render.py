"""Render a resolved answer as Markdown with `[^n]` footnotes, or as JSON.

The Markdown is the answer exactly as received with markers inserted at known offsets
(`markdown_insertions`), so removing them by position gives the answer back.
"""

from __future__ import annotations

import re
from typing import Any

from citations.resolve import CitedAnswer, CitedSource

# How Sources mark a source that only unplaced citations name (it has no marker in the text).
UNPLACED_NOTE = "not placed in the text"

# Characters that would end or restyle a Markdown link text; `-`, `'` and `.` stay readable.
_LINK_TEXT_SPECIAL = re.compile(r"([\\`*_\[\]<>])")


def markdown_insertions(cited: CitedAnswer, *, label_prefix: str = "") -> list[tuple[int, str]]:
    """Return (answer offset, marker text) pairs in offset order."""
    return [
        (marker.offset, marker.insertion("".join(f"[^{label_prefix}{n}]" for n in marker.numbers)))
        for marker in cited.markers
    ]


def insert_at(text: str, insertions: list[tuple[int, str]]) -> str:
    """Return `text` with each insertion placed at its offset (offsets ascending)."""
    pieces: list[str] = []
    previous = 0
    for offset, inserted in insertions:
        pieces.append(text[previous:offset])
        pieces.append(inserted)
        previous = offset
    pieces.append(text[previous:])
    return "".join(pieces)


def render_markdown(cited: CitedAnswer, *, label_prefix: str = "") -> str:
    """Return the answer with `[^n]` markers and, when anything is cited, its footnote lines.

    `label_prefix` keeps labels unique when several answers share one document.
    """
    body = insert_at(cited.answer, markdown_insertions(cited, label_prefix=label_prefix))
    if not cited.sources:
        return body
    lines = [f"[^{label_prefix}{s.number}]: {markdown_source(s)}" for s in cited.sources]
    return body + "\n\n" + "\n".join(lines) + "\n"


def markdown_source(source: CitedSource) -> str:
    """Return `[Label](url)`, or the bare label when there is no http(s) URL; a source with no
    marker in the text says so."""
    label = _LINK_TEXT_SPECIAL.sub(r"\\\1", source.label)
    entry = f"[{label}]({source.url})" if source.url else label
    return entry if source.placed else f"{entry} ({UNPLACED_NOTE})"


def render_json(cited: CitedAnswer) -> dict[str, Any]:
    """Return everything resolved, as JSON-serialisable data."""
    return {
        "answer": cited.answer,
        "references": [
            {
                "position": r.position,
                "start": r.start,
                "end": r.end,
                "tool_name": r.tool_name,
                "audit_id": r.audit_id,
                "source_key": r.source_key,
                "footnote": r.footnote,
                "is_valid": r.is_valid,
                "problem": r.problem,
                "passages": [p.to_data() for p in r.passages],
                "data": r.data,
            }
            for r in cited.references
        ],
        "sources": [
            {
                "number": s.number,
                "key": s.key,
                "type": s.type,
                "label": s.label,
                "name": s.name,
                "headline": s.headline,
                "url": s.url,
                "published_on": s.published_on.isoformat() if s.published_on else None,
                "placed": s.placed,
                # Only for a page the site read itself (citations.pages).
                **({"page": cited.pages[s.key].to_data()} if s.key in cited.pages else {}),
            }
            for s in cited.sources
        ],
        "numbering": [{"offset": m.offset, "footnotes": list(m.numbers)} for m in cited.markers],
        "claims": [
            {
                "start": c.start,
                "end": c.end,
                "footnotes": list(c.footnotes),
                "check": c.check.to_dict() if c.check else None,
            }
            for c in cited.claims
        ],
        "tool_attributions": [
            {
                "tool_name": t.display_name,
                "audit_id": t.audit_id,
                "audit_type": t.tool_call.kind if t.tool_call else None,
                "title": t.title,
                "spans": [list(span) for span in t.spans],
            }
            for t in cited.tool_attributions
        ],
    }
