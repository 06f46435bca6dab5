"""Chat ids and checkpoint ids: what they carry, and HMAC signing so any process can trust them.

A token is `<kind>_<payload>.<signature>`: the payload is a few packed bytes in base64url and the
signature a truncated HMAC-SHA256 over the kind and the payload, so a chat id cannot pass for a
checkpoint id, and a token from another secret (another deployment) or an edited one is simply
not found. A checkpoint carries its branch folded into a `BranchContext`, not the branch's
questions, so its id stays under `MAX_TOKEN_CHARS` however long the conversation grows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from collections.abc import Sequence
from dataclasses import dataclass

PERSISTENCE_MODES = ("enabled", "disabled")  # stored as their index
# 128 bits of HMAC is plenty against forgery and keeps ids short.
_SIGNATURE_BYTES = 16
MAX_CONTEXT_COMPANIES = 8  # more than any question names; one byte each
# nonce (8), persistence; then created_at, checkpoint nonce (4), turns, question chars, topic,
# company count; then one byte per company.
_CHAT = struct.Struct(">8sB")
_CHECKPOINT = struct.Struct(">8sBd4sHIBB")
_MAX_PAYLOAD = _CHECKPOINT.size + MAX_CONTEXT_COMPANIES
MAX_TOKEN_CHARS = len("ckpt_.") + -(-_MAX_PAYLOAD * 4 // 3) + -(-_SIGNATURE_BYTES * 4 // 3)


@dataclass(frozen=True)
class Chat:
    nonce: str  # 16 hex digits
    persistence_mode: str  # "enabled" | "disabled", fixed for the life of the chat


@dataclass(frozen=True)
class PastTurn:
    """What a finished turn tells the later questions of its branch."""

    question: str
    companies: tuple[str, ...]
    topic: str | None


@dataclass(frozen=True)
class BranchContext:
    """What a follow-up needs of the earlier turns of its branch, in a fixed size."""

    turns: int = 0
    question_chars: int = 0  # of every question so far: the rough token counts need no more
    companies: tuple[str, ...] = ()  # of the latest turn that named any: what "its" refers to
    topic: str | None = None  # of the latest turn: "And Apple?" asks it again

    def after(self, turn: PastTurn) -> BranchContext:
        """Return the context of the branch extended by `turn`."""
        return BranchContext(
            turns=self.turns + 1,
            question_chars=self.question_chars + len(turn.question),
            companies=turn.companies[:MAX_CONTEXT_COMPANIES] or self.companies,
            topic=turn.topic,
        )


@dataclass(frozen=True)
class Checkpoint:
    chat: Chat
    created_at: float  # Unix time: checked against the TTL of chats without persistence
    nonce: str  # 8 hex digits
    context: BranchContext  # the branch up to and including this checkpoint's turn


class TokenSigner:
    def __init__(self, secret: str, *, companies: Sequence[str], topics: Sequence[str]) -> None:
        """Sign with `secret`; a context names companies and topics by their place in these."""
        if not secret:
            raise ValueError("The demo agent needs a non-empty secret to sign its ids.")
        if max(len(companies), len(topics)) > 255:
            raise ValueError("A context stores companies and topics in one byte each.")
        self._key = hashlib.sha256(b"researchsite-demo-agent:" + secret.encode()).digest()
        self._companies = tuple(companies)
        self._topics = tuple(topics)

    def chat_id(self, chat: Chat) -> str:
        # Deterministic, so a checkpoint (which carries the chat) can rebuild its chat id.
        return self._sign("chat", _CHAT.pack(*_pack_chat(chat)))

    def read_chat_id(self, token: str) -> Chat | None:
        """Return the chat a chat id names, or None if it is not one of ours."""
        payload = self._verify("chat", token)
        if payload is None or len(payload) != _CHAT.size:
            return None
        return _unpack_chat(*_CHAT.unpack(payload))

    def checkpoint_id(self, checkpoint: Checkpoint) -> str:
        context = checkpoint.context
        companies = [
            self._companies.index(key) for key in context.companies if key in self._companies
        ][:MAX_CONTEXT_COMPANIES]
        topic = self._topics.index(context.topic) + 1 if context.topic in self._topics else 0
        payload = _CHECKPOINT.pack(
            *_pack_chat(checkpoint.chat),
            checkpoint.created_at,
            bytes.fromhex(checkpoint.nonce),
            min(context.turns, 0xFFFF),
            min(context.question_chars, 0xFFFFFFFF),
            topic,
            len(companies),
        )
        return self._sign("ckpt", payload + bytes(companies))

    def read_checkpoint_id(self, token: str) -> Checkpoint | None:
        """Return the checkpoint a checkpoint id names, or None if it is not one of ours."""
        payload = self._verify("ckpt", token)
        if payload is None or len(payload) < _CHECKPOINT.size:
            return None
        head, tail = payload[: _CHECKPOINT.size], payload[_CHECKPOINT.size :]
        nonce, mode, created_at, own_nonce, turns, chars, topic, count = _CHECKPOINT.unpack(head)
        chat = _unpack_chat(nonce, mode)
        if chat is None or count != len(tail) or topic > len(self._topics):
            return None
        if any(index >= len(self._companies) for index in tail):
            return None
        context = BranchContext(
            turns=turns,
            question_chars=chars,
            companies=tuple(self._companies[index] for index in tail),
            topic=self._topics[topic - 1] if topic else None,
        )
        return Checkpoint(chat, created_at, own_nonce.hex(), context)

    def _sign(self, kind: str, payload: bytes) -> str:
        body = _b64encode(payload)
        return f"{kind}_{body}.{self._signature(kind, body)}"

    def _verify(self, kind: str, token: str) -> bytes | None:
        prefix, _, rest = token.partition("_")
        body, _, signature = rest.partition(".")
        expected = self._signature(kind, body)
        if prefix != kind or not hmac.compare_digest(signature.encode(), expected.encode()):
            return None
        try:
            return _b64decode(body)
        except (ValueError, binascii.Error):
            return None

    def _signature(self, kind: str, body: str) -> str:
        digest = hmac.new(self._key, f"{kind}.{body}".encode(), hashlib.sha256).digest()
        return _b64encode(digest[:_SIGNATURE_BYTES])


def _pack_chat(chat: Chat) -> tuple[bytes, int]:
    return bytes.fromhex(chat.nonce), PERSISTENCE_MODES.index(chat.persistence_mode)


def _unpack_chat(nonce: bytes, mode: int) -> Chat | None:
    if mode >= len(PERSISTENCE_MODES):
        return None
    return Chat(nonce.hex(), PERSISTENCE_MODES[mode])


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
