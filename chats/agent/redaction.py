"""The one redaction of secrets, for every text an agent sends before it reaches anything else.

Whatever an agent or an upstream writes may echo what it was sent: an API key from the request
headers, a token from a prompt. Every configured secret (`SECRET_SETTINGS`, read from the
settings at each call so a changed setting is honoured) and the common shapes of provider keys
are masked wherever agent text enters the site:

- the run (`chats/run/turn_run.py`) passes every event through a `StreamRedaction` before it is
  logged, relayed or folded into the answer, so the event log, the frames, the turn's answer and
  error, the share page and the exports only ever hold the masked text;
- the clients' error messages use `redact` (it also folds whitespace and bounds the length);
- the log handlers carry `RedactSecretsFilter`, for a line that quotes an upstream exception.

In the answer a secret is replaced by a mask of the same length: citations point into the
answer by character offsets, which must not move. A secret split across two answer deltas is
caught too: the stream holds back a delta's tail while it could still be the start of a secret.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from chats.agent.events import AgentEvent, AnswerEvent, event_from_data

# Settings that hold a secret the site sends somewhere (or signs with).
SECRET_SETTINGS = (
    "BIGDATA_API_KEY",
    "GEMINI_API_KEY",
    "OPENAI_API_KEY",
    "XAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "LLMSDK_AGENT_TOKEN",
    "DEMO_AGENT_TOKEN",
    "DEMO_AGENT_SECRET",
    "SECRET_KEY",
    "OIDC_CLIENT_SECRET",  # sent to the identity provider's token endpoint
)
# Shorter values are not masked: a three-letter "secret" would mask ordinary words.
MIN_SECRET_CHARS = 8
# The shapes of provider keys (OpenAI and Anthropic `sk-…`, xAI `xai-…`, Google `AIza…`) and of
# this site's API tokens (`rsk_…`), masked even when they are not ours: a key a model repeats
# should not be published either, nor a token pasted into a question or a log line. Each starts
# with its marker, which is looked for first (a substring test costs far less than the pattern,
# and most text holds none).
KEY_SHAPES = {
    "rsk_": r"\brsk_[A-Za-z0-9_-]{43}",  # this site's own API tokens (chats/api/services.py)
    "sk-": r"\bsk-[A-Za-z0-9_-]{32,}",
    "xai-": r"\bxai-[A-Za-z0-9_-]{32,}",
    "AIza": r"\bAIza[0-9A-Za-z_-]{35}",
}
# `api_key=…`, `Authorization: Bearer …`: the value after a secret's name, in error text, where
# an upstream may echo its request. Not applied to answers, where "token: …" is ordinary prose.
_NAMED_SECRET = re.compile(
    r"(?i)(x-api-key|api[_-]?key|authorization|bearer|token|secret)([\"'\s:=]+)([^\s\"',;]+)"
)
# Event types whose text is an error message (the named-secret rule applies to them).
ERROR_TYPES = frozenset({"ERROR", "TOOL_ERROR", "LLM_RETRY"})
REDACTED = "[redacted]"
DETAIL_MAX_CHARS = 300


def configured_secrets() -> tuple[str, ...]:
    """Every secret the settings hold that is long enough to mask, longest first."""
    from django.conf import settings

    if not settings.configured:
        return ()
    values = {getattr(settings, name, "") for name in SECRET_SETTINGS}
    database_password = settings.DATABASES.get("default", {}).get("PASSWORD")
    values.add(database_password or "")
    found = (v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS)
    return tuple(sorted(found, key=lambda v: (-len(v), v)))


def redactor() -> Redactor:
    """The redactor of the secrets configured now (built once per set of secrets)."""
    return _redactor_for(configured_secrets())


@functools.lru_cache(maxsize=8)
def _redactor_for(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def mask(secret: str) -> str:
    """A mask as long as `secret`: offsets into the text around it stay where they were."""
    n = len(secret)
    return (REDACTED + "*" * n)[:n] if n >= len(REDACTED) else "*" * n


class Redactor:
    """Masks the given secrets and the key shapes in text and in JSON values."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets
        alternatives = [re.escape(secret) for secret in secrets] + list(KEY_SHAPES.values())
        self._pattern = re.compile("|".join(alternatives))
        self._markers = (*secrets, *KEY_SHAPES)
        # Every proper prefix of a secret, by its last character, longest first: the prefixes
        # a text could end with are those ending with its own last character.
        self._prefixes_by_last: dict[str, list[str]] = {}
        for secret in secrets:
            for end in range(1, len(secret)):
                self._prefixes_by_last.setdefault(secret[end - 1], []).append(secret[:end])
        for prefixes in self._prefixes_by_last.values():
            prefixes.sort(key=len, reverse=True)

    def text(self, text: str) -> str:
        """`text` with every secret and key shape masked, its length unchanged."""
        if not self.has_marker(text):
            return text
        return self._pattern.sub(lambda match: mask(match[0]), text)

    def has_marker(self, text: str) -> bool:
        """Whether `text` holds a secret or a key shape's marker (else nothing in it is masked)."""
        for marker in self._markers:  # noqa: SIM110 (a loop: no generator for every delta)
            if marker in text:
                return True
        return False

    def error_text(self, text: str) -> str:
        """Error text: also the value after a secret's name (`api_key=…`, `Bearer …`)."""
        return _NAMED_SECRET.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", self.text(text))

    def value(self, value: Any, *, error: bool = False) -> tuple[Any, bool]:
        """A JSON value with every string (keys too) masked, and whether any was."""
        if isinstance(value, str):
            masked = self.error_text(value) if error else self.text(value)
            return masked, masked != value
        if isinstance(value, dict):
            items = [
                (self.value(key, error=error), self.value(item, error=error))
                for key, item in value.items()
            ]
            if any(key[1] or item[1] for key, item in items):
                return {key[0]: item[0] for key, item in items}, True
            return value, False
        if isinstance(value, list):
            masked_items = [self.value(item, error=error) for item in value]
            if any(changed for _, changed in masked_items):
                return [item for item, _ in masked_items], True
            return value, False
        return value, False

    def held_back(self, text: str) -> int:
        """How many of `text`'s last characters could be the start of a secret (0: none)."""
        for prefix in self._prefixes_by_last.get(text[-1:], ()):
            if text.endswith(prefix):
                return len(prefix)
        return 0


class StreamRedaction:
    """The redaction of one run's events, in order: `events` for each event, `flush` at the end.

    An answer delta whose end could begin a secret is held back until the next event shows
    whether it does; the held text goes out, masked or not, before any event of another type.
    """

    def __init__(self, redaction: Redactor | None = None) -> None:
        self.redactor = redaction or redactor()
        self.pending: AnswerEvent | None = None  # the held tail, as the delta it came from

    def events(
        self, event: AgentEvent, data: dict[str, Any]
    ) -> list[tuple[AgentEvent, dict[str, Any]]]:
        """The events (with their data) to log in place of this one: none, one or two."""
        if type(event) is AnswerEvent:
            return self._answer(event, data)
        ready = self.flush()
        masked, changed = self.redactor.value(data, error=event.type in ERROR_TYPES)
        if changed:
            clean = event_from_data(masked)  # its wire text (`raw`) is left behind with the secret
            if clean is not None:
                event, data = clean, masked
        ready.append((event, data))
        return ready

    def flush(self) -> list[tuple[AgentEvent, dict[str, Any]]]:
        """The answer text held back, as one delta (or nothing)."""
        held, self.pending = self.pending, None
        return [] if held is None else [(held, held.data)]

    def _answer(
        self, event: AnswerEvent, data: dict[str, Any]
    ) -> list[tuple[AgentEvent, dict[str, Any]]]:
        redactor = self.redactor
        if self.pending is None:
            content = event.content
            if not redactor.has_marker(content) and not redactor.held_back(content):
                return [(event, data)]  # nothing to mask or hold: the event as it came
            held = ""
        else:
            held = self.pending.content
        text = redactor.text(held + event.content)
        keep = redactor.held_back(text)
        ready_text, tail = text[: len(text) - keep], text[len(text) - keep :]
        self.pending = AnswerEvent(content=tail, chat_id=event.chat_id) if tail else None
        if not ready_text:
            return []
        delta = AnswerEvent(content=ready_text, chat_id=event.chat_id)
        return [(delta, delta.data)]


def redact(text: str, *secrets: str) -> str:
    """Return upstream error text safe to show: secrets and key-like values masked, one line,
    bounded. An upstream may echo the request (headers included) in its error body; `secrets`
    adds keys that are not settings (a client configured by hand)."""
    extra = tuple(s for s in secrets if s and len(s) >= 4)
    for secret in extra:
        text = text.replace(secret, REDACTED)
    text = redactor().error_text(text)
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_MAX_CHARS else text[: DETAIL_MAX_CHARS - 1] + "…"


class RedactSecretsFilter(logging.Filter):
    """A log handler's filter: the line, and the traceback it carries, with secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = redactor()
        message = record.getMessage()
        masked = current.text(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = current.text(record.exc_text)
        return True
