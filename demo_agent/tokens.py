"""Chat ids and checkpoint ids: what they carry, and HMAC signing so any process can trust them.

A token is `<kind>_<payload>.<signature>`: the payload is base64url JSON and the signature is a
truncated HMAC-SHA256 over the kind and the payload, so a chat id cannot pass for a checkpoint id,
and a token from another secret (another deployment) or an edited one is simply not found.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

PERSISTENCE_CODES = {"enabled": "e", "disabled": "d"}
_PERSISTENCE_BY_CODE = {code: mode for mode, code in PERSISTENCE_CODES.items()}
# 128 bits of HMAC is plenty against forgery and keeps ids short.
_SIGNATURE_BYTES = 16
MAX_HISTORY_TURNS = 6
MAX_QUESTION_CHARS = 80


@dataclass(frozen=True)
class Chat:
    nonce: str
    persistence_mode: str  # "enabled" | "disabled", fixed for the life of the chat


@dataclass(frozen=True)
class PastTurn:
    """What a later question may need to know about an earlier one."""

    question: str
    companies: tuple[str, ...]
    topic: str | None


@dataclass(frozen=True)
class Checkpoint:
    chat: Chat
    created_at: float  # Unix time: checked against the TTL of chats without persistence
    nonce: str
    history: tuple[PastTurn, ...]  # the branch up to and including this checkpoint's turn


class TokenSigner:
    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("The demo agent needs a non-empty secret to sign its ids.")
        self._key = hashlib.sha256(b"researchsite-demo-agent:" + secret.encode()).digest()

    def chat_id(self, chat: Chat) -> str:
        # Deterministic, so a checkpoint (which carries the chat) can rebuild its chat id.
        return self._sign("chat", {"n": chat.nonce, "p": PERSISTENCE_CODES[chat.persistence_mode]})

    def read_chat_id(self, token: str) -> Chat | None:
        """Return the chat a chat id names, or None if it is not one of ours."""
        payload = self._verify("chat", token)
        try:
            return _chat(payload["n"], payload["p"])
        except (TypeError, KeyError, ValueError):
            return None

    def checkpoint_id(self, checkpoint: Checkpoint) -> str:
        history = [
            [turn.question[:MAX_QUESTION_CHARS], list(turn.companies), turn.topic]
            for turn in checkpoint.history[-MAX_HISTORY_TURNS:]
        ]
        payload = {
            "n": checkpoint.chat.nonce,
            "p": PERSISTENCE_CODES[checkpoint.chat.persistence_mode],
            "t": round(checkpoint.created_at, 3),
            "i": checkpoint.nonce,
            "h": history,
        }
        return self._sign("ckpt", payload)

    def read_checkpoint_id(self, token: str) -> Checkpoint | None:
        """Return the checkpoint a checkpoint id names, or None if it is not one of ours."""
        payload = self._verify("ckpt", token)
        try:
            history = tuple(
                PastTurn(question=str(q), companies=tuple(map(str, cos)), topic=tp and str(tp))
                for q, cos, tp in payload["h"]
            )
            created_at = float(payload["t"])
            nonce = str(payload["i"])
            return Checkpoint(_chat(payload["n"], payload["p"]), created_at, nonce, history)
        except (TypeError, KeyError, ValueError):
            return None

    def _sign(self, kind: str, payload: dict[str, Any]) -> str:
        body = _b64encode(json.dumps(payload, separators=(",", ":")).encode())
        return f"{kind}_{body}.{self._signature(kind, body)}"

    def _verify(self, kind: str, token: str) -> Any:
        prefix, _, rest = token.partition("_")
        body, _, signature = rest.partition(".")
        expected = self._signature(kind, body)
        if prefix != kind or not hmac.compare_digest(signature.encode(), expected.encode()):
            return None
        try:
            return json.loads(_b64decode(body))
        except (ValueError, binascii.Error):
            return None

    def _signature(self, kind: str, body: str) -> str:
        digest = hmac.new(self._key, f"{kind}.{body}".encode(), hashlib.sha256).digest()
        return _b64encode(digest[:_SIGNATURE_BYTES])


def _chat(nonce: Any, code: Any) -> Chat:
    if not isinstance(nonce, str) or code not in _PERSISTENCE_BY_CODE:
        raise ValueError("malformed chat")
    return Chat(nonce, _PERSISTENCE_BY_CODE[code])


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
