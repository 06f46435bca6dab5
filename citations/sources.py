"""What a GROUNDING `source` object says: its deduplication key, display label and safe link.

Shapes (seed 000, notes/PROTOCOL.md): BIGDATA carries `src_name`, `ts`, `url` (not always);
EXTERNAL nests its display name, link and sometimes a date in `action`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import quote, urlsplit

KNOWN_TYPES = frozenset({"BIGDATA", "EXTERNAL"})
KEY_MAX_LENGTH = 600  # Source.key
_DATE_PREFIX = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
# Percent-encode everything else (spaces, quotes, <>, parentheses, backslash, non-ASCII) so the
# URL survives a Markdown link destination and an HTML attribute unchanged in meaning.
_URL_SAFE = "!#$%&'*+,/:;=?@[]~"


@dataclass(frozen=True, slots=True)
class SourceFields:
    """The display fields of one source object."""

    key: str
    type: str
    name: str
    headline: str
    url: str
    published_on: date | None
    label: str


def source_fields(source: dict[str, Any]) -> SourceFields:
    """Return the key, label and link of a source object."""
    source_type = _type(source)
    action = _dict(source.get("action"))
    url = http_url(_raw_url(source, source_type, action))
    headline = _one_line(source.get("hd"))
    name = _name(source, source_type, action) or headline or urlsplit(url).hostname or "Source"
    published_on = _published_on(source, source_type, action)
    label = f"{name} - {published_on.isoformat()}" if published_on else name
    return SourceFields(
        key=source_key(source),
        type=source_type,
        name=name,
        headline=headline,
        url=url,
        published_on=published_on,
        label=label,
    )


def source_key(source: dict[str, Any]) -> str:
    """Return the deduplication key: id, else URL, else headline, else a hash of the object.

    Never the audit_id (seed 000: one tool call returns many sources). The kind prefix keeps an
    id from colliding with an unrelated headline that happens to spell the same text.
    """
    key = _key("id", source.get("id"))
    if key is None:
        key = _key("url", _raw_url(source, _type(source), _dict(source.get("action"))))
    if key is None:
        key = _key("hd", source.get("hd"))
    if key is None:
        canonical = json.dumps(source, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        key = "sha256:" + _sha256(canonical)
    return key


def http_url(url: Any) -> str:
    """Return the URL percent-encoded when it is an absolute http(s) URL, else ""."""
    if not isinstance(url, str):
        return ""
    url = url.strip()
    try:
        parts = urlsplit(url)  # also drops tabs and newlines, as browsers do
    except ValueError:
        return ""
    if parts.scheme.lower() not in {"http", "https"} or not parts.netloc:
        return ""
    try:
        return quote(url, safe=_URL_SAFE)
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: not a real URL
        return ""


def _type(source: dict[str, Any]) -> str:
    return source["type"] if source.get("type") in KNOWN_TYPES else "OTHER"


def _raw_url(source: dict[str, Any], source_type: str, action: dict[str, Any]) -> str:
    if source_type == "EXTERNAL":
        candidates = (action.get("url"), source.get("url"))
    elif source_type == "BIGDATA":
        candidates = (source.get("url"),)
    else:
        candidates = (source.get("url"), action.get("url"))
    return next((c.strip() for c in candidates if isinstance(c, str) and c.strip()), "")


def _name(source: dict[str, Any], source_type: str, action: dict[str, Any]) -> str:
    if source_type == "EXTERNAL":
        candidates = (action.get("name"),)
    elif source_type == "BIGDATA":
        candidates = (source.get("src_name"),)
    else:
        candidates = (source.get("src_name"), action.get("name"), source.get("name"))
    return next((n for c in candidates if (n := _one_line(c))), "")


def _published_on(source: dict[str, Any], source_type: str, action: dict[str, Any]) -> date | None:
    candidates = [source.get("ts")]
    if source_type != "BIGDATA":
        candidates[:0] = [action.get("date"), action.get("ts"), action.get("published_at")]
    return next((d for c in candidates if (d := _date(c)) is not None), None)


def _date(value: Any) -> date | None:
    """Return the date part of an ISO 8601 string as written, or of an epoch (s or ms) in UTC."""
    if isinstance(value, str):
        match = _DATE_PREFIX.match(value.strip())
        if match:
            try:
                return date(*map(int, match.groups()))
            except ValueError:
                return None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC).date()
        except (ValueError, OverflowError, OSError):
            return None
    return None


def _key(kind: str, value: Any) -> str | None:
    """Return `kind:value`, or a hash of the value when it would not fit or store as UTF-8."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    value = str(value).strip()
    if not value:
        return None
    key = f"{kind}:{value}"
    if len(key) <= KEY_MAX_LENGTH and _encodable(key):
        return key
    return f"{kind}-sha256:" + _sha256(value)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _one_line(value: Any) -> str:
    return " ".join(value.split()) if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
