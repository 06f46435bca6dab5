"""The one redaction: a secret split across answer deltas is masked whole, in place; log lines
and tracebacks lose theirs."""

from __future__ import annotations

import logging
import sys

from chats.agent.events import AnswerEvent
from chats.agent.redaction import Redactor, RedactSecretsFilter, StreamRedaction


def test_a_secret_split_across_any_two_deltas_is_masked_whole():
    secret = "abcdefgh-secret-42"
    text = f"before {secret} after, and a prefix {secret[:5]} that is not one"
    for cut in range(1, len(text)):
        redaction = StreamRedaction(Redactor((secret,)))
        out = []
        for piece in (text[:cut], text[cut:]):
            out += [e.content for e, _ in redaction.events(AnswerEvent(content=piece), {})]
        out += [e.content for e, _ in redaction.flush()]
        joined = "".join(out)
        assert secret not in joined and len(joined) == len(text), cut
        assert joined.endswith(f"a prefix {secret[:5]} that is not one")


def test_text_without_a_secret_passes_through_as_the_same_event():
    redaction = StreamRedaction(Redactor(("abcdefgh-secret-42",)))
    event = AnswerEvent(content="plain words")
    assert redaction.events(event, event.data) == [(event, event.data)]


def test_log_lines_and_tracebacks_have_secrets_masked(settings):
    settings.OPENAI_API_KEY = "sk-test-openai-key-0123456789"
    handler_filters = [f for h in logging.getLogger().handlers for f in h.filters]
    assert any(isinstance(f, RedactSecretsFilter) for f in handler_filters)  # settings.LOGGING
    try:
        raise ValueError(f"upstream said {settings.OPENAI_API_KEY}")
    except ValueError:
        record = logging.LogRecord(
            "x",
            logging.ERROR,
            __file__,
            1,
            "calling with %s",
            (settings.OPENAI_API_KEY,),
            sys.exc_info(),
        )
    RedactSecretsFilter().filter(record)
    line = logging.Formatter().format(record)
    assert "calling with [redacted]" in line and "upstream said [redacted]" in line
    assert settings.OPENAI_API_KEY not in line


def test_the_identity_providers_client_secret_is_masked_in_log_lines(settings):
    settings.OIDC_CLIENT_SECRET = "oidc-client-secret-0123456789"
    record = logging.LogRecord(
        "allauth",
        logging.ERROR,
        __file__,
        1,
        "token request with %s",
        ("oidc-client-secret-0123456789",),
        None,
    )
    RedactSecretsFilter().filter(record)
    line = logging.Formatter().format(record)
    assert line.startswith("token request with [redacted]")
    assert "oidc-client-secret" not in line
