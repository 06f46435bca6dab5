"""Writes: rename, pin, archive and delete a chat; share its visible branch or stop sharing."""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from chats.library.search import chat_search_index_update
from chats.models import Chat, ChatShare, Turn
from chats.selectors import chat_branch

TITLE_MAX_CHARS = 200


class LibraryError(ValueError):
    """The change cannot be made as asked; the message says why, in the user's words."""


@transaction.atomic
def chat_rename(*, chat: Chat, title: str) -> Chat:
    title = " ".join(title.split())[:TITLE_MAX_CHARS]
    if not title:
        raise LibraryError("A chat needs a title.")
    chat.title = title
    chat.save(update_fields=["title"])
    chat_search_index_update(chat_id=chat.pk)
    return chat


def chat_pin(*, chat: Chat, pinned: bool) -> Chat:
    chat.pinned = pinned
    chat.save(update_fields=["pinned"])
    return chat


def chat_archive(*, chat: Chat, archived: bool) -> Chat:
    chat.archived_at = timezone.now() if archived else None
    chat.save(update_fields=["archived_at"])
    return chat


def chat_delete(*, chat: Chat) -> None:
    """Delete the chat with its turns, events, references, search document and shares."""
    chat.delete()


@transaction.atomic
def chat_share(*, chat: Chat, user) -> ChatShare:
    """Share the visible branch as it is now; an existing link is moved to it, not replaced.

    A share is a snapshot: it shows the branch up to its newest finished turn, under the chat's
    title, as they were at the time of sharing, however the chat goes on. Sharing again updates
    the same link, so a link that was already sent keeps working (LibreChat PR #14712 broke
    links on update).
    """
    leaf = _newest_finished_turn(chat)
    if leaf is None:
        raise LibraryError("There is no finished answer to share yet.")
    share = ChatShare.objects.select_for_update().active().filter(chat=chat).first()
    if share is None:
        return ChatShare.objects.create(
            chat=chat,
            leaf_turn=leaf,
            title=chat.title,
            created_by=user,
            token=secrets.token_urlsafe(24),
        )
    share.leaf_turn = leaf
    share.title = chat.title
    share.updated_at = timezone.now()
    share.save(update_fields=["leaf_turn", "title", "updated_at"])
    return share


def chat_share_revoke(*, chat: Chat) -> int:
    """Stop sharing the chat: its link answers 404 from now on. Return the links revoked."""
    return ChatShare.objects.active().filter(chat=chat).update(revoked_at=timezone.now())


def _newest_finished_turn(chat: Chat) -> Turn | None:
    finished = [item.turn for item in chat_branch(chat=chat) if item.turn.is_finished]
    # A streaming turn can only be the last one on a branch: everything before it is kept.
    return finished[-1] if finished else None
