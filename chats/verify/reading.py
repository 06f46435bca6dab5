"""Reading a fetched page's main text: what runs in the helper processes (`chats.verify.readers`).

Nothing here touches Django, the database or the event loop: a page's body arrives as bytes (at
most the fetcher's cap, already decompressed) with its media type and declared charset, and its
main text, or one line saying why there is none, goes back. Parsing HTML is where a hostile or
broken page does harm (lxml's parsers are not safe to share between threads, and trafilatura
keeps module-level ones), so it runs in a process of its own, under the limits `limit_process`
sets there; whatever happens to that process happens to this page only.
"""

from __future__ import annotations

import codecs
import resource

MAX_TEXT_CHARS = 500_000  # of main text kept; an article is a few thousand


def limit_process(memory_bytes: int) -> None:
    """Cap this helper process's memory (its address space), then load the extractor, so that
    the first page it reads does not pay for the import (0.2 s) within its time cap."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    import trafilatura  # noqa: F401


def read_page(body: bytes, kind: str, charset: str, url: str) -> tuple[str, str]:
    """Return (main text, "") or ("", why it could not be read) for a page's body.

    `kind` is "html" or "text"; `charset` is what the response declared ("" for none: UTF-8).
    A charset that is not a text encoding Python knows ("rot13", "x-unknown") is a problem of
    this page, not an error.
    """
    encoding = charset or "utf-8"
    try:
        if not codecs.lookup(encoding)._is_text_encoding:
            return "", f"an unreadable character set ({charset})"
    except LookupError:
        return "", f"an unknown character set ({charset})"
    try:
        decoded = body.decode(encoding, "replace")
    except (LookupError, ValueError):
        return "", f"an unreadable character set ({charset})"
    if kind == "html":
        import trafilatura

        text = trafilatura.extract(decoded, url=url, include_comments=False, include_tables=True)
    else:
        text = decoded
    text = (text or "").strip()[:MAX_TEXT_CHARS]
    return (text, "") if text else ("", "no readable text on the page")
