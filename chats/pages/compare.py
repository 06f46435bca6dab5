"""Compare two versions of a turn: on a chat the user may read (theirs, or their team's), and
on a share that holds both.

A share shows one branch, the path from the first question to its leaf turn, as it stood when
shared: its Compare offers the versions of a question on that path asked with the same words
(a "Re-run", a watch's run) and finished by then, never an "Edit", whose other question (and
what followed it) is another branch, which a share does not show."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from chats.answer.compare import compare_turns, version_pair
from chats.library.selectors import chat_share_get, chat_share_turns, chat_share_versions
from chats.models import Turn
from chats.selectors import FINISHED, chat_get_readable, turn_versions


@require_GET
@login_required
def turn_compare(request: HttpRequest, chat_id: int, turn_id: int) -> HttpResponse:
    chat = chat_get_readable(user=request.user, chat_id=chat_id)  # a team's chat too
    turn = get_object_or_404(Turn, pk=turn_id, chat=chat)
    context = _comparison(request, turn_versions(turns=[turn], statuses=FINISHED)[turn.pk])
    context |= {"title": chat.title, "back_url": reverse("chat_detail", args=[chat.pk])}
    return render(request, "chats/turn_compare.html", context)


@require_GET
@login_required
def shared_turn_compare(request: HttpRequest, token: str, turn_id: int) -> HttpResponse:
    """Versions of a turn the share shows, as they stood when it was shared."""
    share = chat_share_get(token=token)
    turn = next((t for t in chat_share_turns(share=share) if t.pk == turn_id), None)
    if turn is None:
        raise Http404("That turn is not in this share.")
    context = _comparison(request, chat_share_versions(share=share, turns=[turn])[turn.pk])
    # The share's title: a rename since shows on the share only once it is shared again.
    context |= {"title": share.title, "back_url": reverse("chat_shared", args=[token])}
    response = render(request, "chats/turn_compare.html", context)
    response["Referrer-Policy"] = "no-referrer"  # the token is in the URL, as on the share
    response["X-Robots-Tag"] = "noindex"
    return response


def _comparison(request: HttpRequest, versions: list[Turn]) -> dict:
    pair = version_pair(
        versions=versions,
        before_id=_id(request.GET.get("a")),
        after_id=_id(request.GET.get("b")),
    )
    if pair is None:  # the others are still being written, or failed before answering
        return {"pair": None, "question": versions[0].question if versions else ""}
    return {
        "pair": pair,
        "choices": [(pair.number(v), v) for v in pair.versions],
        "comparison": compare_turns(before=pair.before, after=pair.after),
    }


def _id(value: str | None) -> int | None:
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 19 else None
