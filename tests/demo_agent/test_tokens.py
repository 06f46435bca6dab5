"""Signed chat and checkpoint ids."""

from __future__ import annotations

from demo_agent.tokens import MAX_HISTORY_TURNS, Chat, Checkpoint, PastTurn, TokenSigner

SIGNER = TokenSigner("secret")
CHAT = Chat(nonce="0123456789abcdef", persistence_mode="enabled")


def _checkpoint(turns: int = 1) -> Checkpoint:
    long_question = "x" * 200
    history = tuple(PastTurn(f"Q{i} {long_question}", ("nvidia",), "margins") for i in range(turns))
    return Checkpoint(chat=CHAT, created_at=1_800_000_000.5, nonce="abc123", history=history)


def test_ids_round_trip():
    assert SIGNER.read_chat_id(SIGNER.chat_id(CHAT)) == CHAT
    checkpoint = SIGNER.read_checkpoint_id(SIGNER.checkpoint_id(_checkpoint()))
    assert checkpoint.chat == CHAT
    assert checkpoint.created_at == 1_800_000_000.5
    assert checkpoint.history[0].companies == ("nvidia",)


def test_checkpoints_stay_compact():
    token = SIGNER.checkpoint_id(_checkpoint(turns=20))
    checkpoint = SIGNER.read_checkpoint_id(token)
    assert len(checkpoint.history) == MAX_HISTORY_TURNS
    assert checkpoint.history[-1].question.startswith("Q19 ")
    assert all(len(turn.question) <= 80 for turn in checkpoint.history)
    assert len(token) < 1200


def test_forged_or_confused_ids_are_rejected():
    chat_id = SIGNER.chat_id(CHAT)
    checkpoint_id = SIGNER.checkpoint_id(_checkpoint())
    assert TokenSigner("other").read_chat_id(chat_id) is None
    assert SIGNER.read_checkpoint_id(chat_id) is None
    assert SIGNER.read_chat_id(checkpoint_id) is None
    for garbage in ("", "chat_", "chat_x.y", "chat_é.ü", "ckpt_" + "A" * 40, chat_id + "x"):
        assert SIGNER.read_chat_id(garbage) is None
        assert SIGNER.read_checkpoint_id(garbage) is None
