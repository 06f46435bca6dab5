"""The URL rules of every request to a URL someone else chose (`chats/outbound.py`): what
`fetchable_url` lets through, and what it refuses before any socket is opened."""

from __future__ import annotations

import pytest

from chats.outbound import Refused, fetchable_url


@pytest.mark.parametrize(
    ("url", "fetched"),
    [
        ("https://news.example/a?b=1#c", "https://news.example/a?b=1"),
        ("http://user:secret@news.example:8080", "http://news.example:8080/"),
        ("http://93.184.215.14/x", "http://93.184.215.14/x"),
        ("http://[2606:2800:220:1::1]/x", "http://[2606:2800:220:1::1]/x"),
    ],
)
def test_an_http_url_is_fetched_without_its_credentials_or_fragment(url, fetched):
    assert fetchable_url(url) == fetched


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://0177.0.0.1/x", "refused: 0177.0.0.1 is an address written in a non-standard form"),
        ("http://0x7f.0.0.1/", "refused: 0x7f.0.0.1 is an address written in a non-standard form"),
        ("http://2130706433/", "refused: 2130706433 is an address written in a non-standard form"),
        ("http://127.1/", "refused: 127.1 is an address written in a non-standard form"),
        ("http://[::1/", "refused: not a valid link"),
        ("http://exa\x00mple.com/", "refused: not a valid link"),
        ("ftp://news.example/", "refused: not an http(s) link (ftp)"),
        ("news.example/a", "refused: not an http(s) link (no scheme)"),
    ],
)  # fmt: skip
def test_a_url_an_http_client_could_read_another_way_is_refused_with_a_reason(url, problem):
    """Resolvers read "0177.0.0.1" as 127.0.0.1 (octal) and httpx refuses to parse it at
    all: both must end as a refusal of that one URL, not an error of the caller's."""
    with pytest.raises(Refused) as refused:
        fetchable_url(url)
    assert str(refused.value) == problem
