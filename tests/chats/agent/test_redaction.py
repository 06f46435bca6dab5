"""The stream's redaction: a secret split across answer deltas is masked whole, in place."""

from __future__ import annotations

from chats.agent.events import AnswerEvent
from chats.agent.redaction import Redactor, StreamRedaction


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
