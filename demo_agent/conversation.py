"""Continuity without shared state: which chat a request belongs to and what its branch knows.

Everything needed to continue a conversation travels in the signed ids, so any process serving
the agent can answer a follow-up. The only process state is a small "latest checkpoint of each
chat" map, used when a request sends a chat_id without from_checkpoint_id.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from demo_agent.errors import HttpError
from demo_agent.request import INITIAL_CHECKPOINT, ResearchRequest
from demo_agent.tokens import BranchContext, Chat, Checkpoint, PastTurn, TokenSigner

MAX_REMEMBERED_CHATS = 2048


@dataclass(frozen=True)
class Conversation:
    chat: Chat
    chat_id: str
    context: BranchContext  # what the earlier turns of the branch this request continues tell


class Conversations:
    def __init__(self, signer: TokenSigner, *, chat_ttl_seconds: float) -> None:
        self._signer = signer
        self._ttl = chat_ttl_seconds
        self._latest: OrderedDict[str, Checkpoint] = OrderedDict()

    def resolve(self, request: ResearchRequest) -> Conversation:
        """Return the conversation a request continues, or raise the API's 400/404."""
        chat = None
        if request.chat_id is not None:
            chat = self._signer.read_chat_id(request.chat_id)
            if chat is None:
                raise HttpError(404, "Chat not found")
        checkpoint = None
        if request.from_checkpoint_id not in (None, INITIAL_CHECKPOINT):
            checkpoint = self._signer.read_checkpoint_id(request.from_checkpoint_id)
            if checkpoint is None or (chat is not None and checkpoint.chat != chat):
                raise HttpError(404, "Checkpoint not found")
            chat = checkpoint.chat
        if chat is None:
            chat = Chat(nonce=secrets.token_hex(8), persistence_mode=request.persistence_mode)
            return Conversation(chat, self._signer.chat_id(chat), BranchContext())

        if chat.persistence_mode != request.persistence_mode:
            raise HttpError(400, "persistence_mode mismatch")
        if request.from_checkpoint_id == INITIAL_CHECKPOINT:
            anchor = None
        else:
            anchor = checkpoint or self._latest.get(chat.nonce)
        expired = anchor is not None and time.time() - anchor.created_at > self._ttl
        if expired and chat.persistence_mode == "disabled":
            raise HttpError(404, "Cannot follow up: chat expired")
        context = anchor.context if anchor else BranchContext()
        return Conversation(chat, self._signer.chat_id(chat), context)

    def checkpoint(self, conversation: Conversation, turn: PastTurn) -> str:
        """Return a fresh checkpoint id after `turn`, remembered as the chat's latest."""
        checkpoint = Checkpoint(
            chat=conversation.chat,
            created_at=time.time(),
            nonce=secrets.token_hex(4),
            context=conversation.context.after(turn),
        )
        token = self._signer.checkpoint_id(checkpoint)
        # Remember the checkpoint as the token carries it, so both paths agree.
        self._latest[conversation.chat.nonce] = self._signer.read_checkpoint_id(token)
        self._latest.move_to_end(conversation.chat.nonce)
        while len(self._latest) > MAX_REMEMBERED_CHATS:
            self._latest.popitem(last=False)
        return token
