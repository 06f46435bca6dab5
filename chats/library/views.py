"""Pages of the library: search, archived chats, organising actions, shares and exports.

Every action is a POST (CSRF-checked) on one of the user's own chats; another user's chat is a
404, as on the chat page. The exports read what the chat page reads: the user's chats and their
teams' (`chat_get_readable`).
"""

from __future__ import annotations

import json
from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chats.answer.display import chat_heading, page_title
from chats.form_replies import redirect_back, wants_json
from chats.library.export import export_chat_json
from chats.library.search import chat_search_for_user
from chats.library.selectors import chat_archived_for_user, chat_share_get, chat_share_page
from chats.library.services import (
    LibraryError,
    chat_archive,
    chat_delete,
    chat_pin,
    chat_rename,
    chat_share,
    chat_share_revoke,
)
from chats.models import Chat, Turn
from chats.selectors import chat_branch, chat_get_for_user, chat_get_readable


@require_GET
@login_required
def chat_search(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")[:200]
    context = {"query": query, "results": chat_search_for_user(user=request.user, query=query)}
    if request.GET.get("fragment"):  # the sidebar's results while typing
        return render(request, "chats/_search_results.html", context)
    return render(request, "chats/chat_search.html", context)


@require_GET
@login_required
def chat_archived(request: HttpRequest) -> HttpResponse:
    archived = chat_archived_for_user(user=request.user)
    return render(request, "chats/chat_archived.html", {"archived": archived})


@require_POST
@login_required
def chat_rename_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    try:
        chat_rename(chat=chat, title=request.POST.get("title", ""))
    except LibraryError as error:
        if wants_json(request):
            return JsonResponse({"error": str(error)}, status=HTTPStatus.BAD_REQUEST)
        return HttpResponse(str(error), status=HTTPStatus.BAD_REQUEST, content_type="text/plain")
    if wants_json(request):
        # Worded as the chat page's frames word it (chat.js and library.js show both alike).
        return JsonResponse(
            {"ok": True, "title": chat_heading(chat.title), "page_title": page_title(chat.title)}
        )
    return redirect_back(request, "chat_detail", chat_id=chat_id)


@require_POST
@login_required
def chat_pin_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    chat_pin(chat=chat, pinned=request.POST.get("pinned") == "1")
    return redirect_back(request, "chat_detail", chat_id=chat_id)


@require_POST
@login_required
def chat_archive_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    archived = request.POST.get("archived") == "1"
    chat_archive(chat=chat, archived=archived)
    if archived:  # it left the main list: go back to the list
        return redirect("chat_list")
    return redirect_back(request, "chat_detail", chat_id=chat_id)  # stay where it was done


@require_POST
@login_required
def chat_delete_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat_delete(chat=chat_get_for_user(user=request.user, chat_id=chat_id))
    return redirect("chat_list")


@require_POST
@login_required
def chat_share_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    try:
        chat_share(chat=chat, user=request.user)
    except LibraryError as error:
        return HttpResponse(str(error), status=HTTPStatus.CONFLICT, content_type="text/plain")
    return redirect(reverse("chat_detail", args=[chat.pk]) + "#share")


@require_POST
@login_required
def chat_share_revoke_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat_share_revoke(chat=chat_get_for_user(user=request.user, chat_id=chat_id))
    return redirect("chat_detail", chat_id=chat_id)


@require_GET
@login_required
def chat_shared(request: HttpRequest, token: str) -> HttpResponse:
    """The read-only view of a share, for any signed-in user who has the link."""
    share = chat_share_get(token=token)
    context = {"share": share, "chat": share.chat, "turns": chat_share_page(share=share)}
    response = render(request, "chats/chat_shared.html", context)
    response["Referrer-Policy"] = "no-referrer"  # the token is in the URL; keep it off links out
    response["X-Robots-Tag"] = "noindex"
    return response


@require_GET
@login_required
def chat_export_json(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_readable(user=request.user, chat_id=chat_id)
    body = json.dumps(export_chat_json(chat=chat), ensure_ascii=False, indent=2)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="chat-{chat.pk}.json"'
    return response


@require_GET
@login_required
def chat_print(request: HttpRequest, chat_id: int) -> HttpResponse:
    """The visible branch on a plain page, laid out for the browser's Print / Save as PDF."""
    chat, turns = _visible_branch(request, chat_id)
    return render(request, "chats/chat_print.html", {"chat": chat, "turns": turns})


def _visible_branch(request: HttpRequest, chat_id: int) -> tuple[Chat, list[Turn]]:
    """A chat the user may read (404 for any other) and the turns of its visible branch."""
    chat = chat_get_readable(user=request.user, chat_id=chat_id)
    return chat, [item.turn for item in chat_branch(chat=chat)]
