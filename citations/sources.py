"""Provider-neutral rules for sources: safe links, bounded dedup keys, labels and dates.

Adapters call these while turning their wire format into `SourceDocument`s, so that every
provider's footnotes are labelled, linked and deduplicated by the same rules.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import quote, urlsplit

KEY_MAX_LENGTH = 600  # Source.key
_DATE_PREFIX = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
# Percent-encode everything else (spaces, quotes, <>, parentheses, backslash, non-ASCII) so the
# URL survives a Markdown link destination and an HTML attribute unchanged in meaning.
_URL_SAFE = "!#$%&'*+,/:;=?@[]~"


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


def url_host(url: str) -> str:
    """Return the URL's host without `www.`: the label of a source with no title."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix("www.")


def source_label(name: str, published_on: date | None) -> str:
    """Return "Name - YYYY-MM-DD", or the name alone when there is no date (docs/PROTOCOL.md,
    "GROUNDING")."""
    return f"{name} - {published_on.isoformat()}" if published_on else name


def bounded_key(kind: str, value: Any) -> str | None:
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


def content_key(value: Any) -> str:
    """Return a key for a source with no id, URL or headline: a hash of its canonical JSON."""
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + _sha256(canonical)


def date_from_value(value: Any) -> date | None:
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


def one_line(value: Any) -> str:
    """Return a string's words on one line, or "" for anything that is not a string."""
    return " ".join(value.split()) if isinstance(value, str) else ""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
