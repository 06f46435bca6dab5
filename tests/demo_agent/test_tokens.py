"""Signed chat and checkpoint ids: round trips, a bounded size, and refusal of anything forged."""

from __future__ import annotations

from demo_agent.tokens import (
    MAX_TOKEN_CHARS,
    BranchContext,
    Chat,
    Checkpoint,
    PastTurn,
    TokenSigner,
)

COMPANIES = ("nvidia", "tesla", "apple")
TOPICS = ("margins", "guidance")
SIGNER = TokenSigner("secret", companies=COMPANIES, topics=TOPICS)
CHAT = Chat(nonce="0123456789abcdef", persistence_mode="enabled")


def _checkpoint(turns: int = 1) -> Checkpoint:
    context = BranchContext()
    for i in range(turns):
        context = context.after(PastTurn(f"Q{i} " + "x" * 200, ("nvidia", "apple"), "margins"))
    return Checkpoint(chat=CHAT, created_at=1_800_000_000.5, nonce="abc12345", context=context)


def test_ids_round_trip():
    assert SIGNER.read_chat_id(SIGNER.chat_id(CHAT)) == CHAT
    checkpoint = _checkpoint(turns=3)
    assert SIGNER.read_checkpoint_id(SIGNER.checkpoint_id(checkpoint)) == checkpoint


def test_the_context_keeps_what_follow_ups_need():
    context = BranchContext().after(PastTurn("How did NVIDIA do?", ("nvidia",), None))
    context = context.after(PastTurn("What about inflation?", (), "margins"))
    assert context.turns == 2
    assert context.companies == ("nvidia",)  # "its" still means NVIDIA
    assert context.topic == "margins"
    assert context.question_chars == len("How did NVIDIA do?") + len("What about inflation?")


def test_ids_stay_the_same_size_however_long_the_chat():
    sizes = {len(SIGNER.checkpoint_id(_checkpoint(turns=n))) for n in (1, 2, 20, 500)}
    assert len(sizes) == 1
    assert max(sizes) <= MAX_TOKEN_CHARS <= 120
    assert len(SIGNER.chat_id(CHAT)) <= 120


def test_forged_or_confused_ids_are_rejected():
    chat_id = SIGNER.chat_id(CHAT)
    checkpoint_id = SIGNER.checkpoint_id(_checkpoint())
    other = TokenSigner("other", companies=COMPANIES, topics=TOPICS)
    assert other.read_chat_id(chat_id) is None
    assert other.read_checkpoint_id(checkpoint_id) is None
    assert SIGNER.read_checkpoint_id(chat_id) is None
    assert SIGNER.read_chat_id(checkpoint_id) is None
    for garbage in ("", "chat_", "chat_x.y", "chat_é.ü", "ckpt_" + "A" * 40, chat_id + "x"):
        assert SIGNER.read_chat_id(garbage) is None
        assert SIGNER.read_checkpoint_id(garbage) is None
