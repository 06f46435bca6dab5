"""Pages: the chat list, a chat, branch switching and the Markdown export."""

from __future__ import annotations

from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from chats.agent.providers import agent_label
from chats.answer.display import page_limits
from chats.answer.export import export_turns_markdown
from chats.answer.structured_output import structured_csv, structured_json
from chats.errors import TurnStartError
from chats.form_replies import wants_json
from chats.models import Turn
from chats.selectors import chat_branch, chat_get_for_user, chat_get_readable
from chats.services import chat_create, chat_select_branch
from chats.teams.selectors import chat_sharing
from chats.usage.selectors import usage_warning_this_month
from citations.render import render_markdown
from citations.selectors import cited_answer_for_turn


@require_GET
@login_required
def chat_list(request: HttpRequest) -> HttpResponse:
    return render(request, "chats/chat_list.html")  # the sidebar comes from chat_library tags


@require_POST
@login_required
def chat_new(request: HttpRequest) -> HttpResponse:
    chat = chat_create(owner=request.user, provider=request.POST.get("agent", ""))
    return redirect("chat_detail", chat_id=chat.pk)


@require_GET
@login_required
def chat_detail(request: HttpRequest, chat_id: int) -> HttpResponse:
    """A chat: its owner's to ask in; read-only, live, for the members of a team it is
    shared with."""
    chat = chat_get_readable(user=request.user, chat_id=chat_id)
    branch = chat_branch(chat=chat)
    context = {
        "chat": chat,
        "branch": branch,
        # Newest in the whole chat, not just this branch: the page's sync asks only for turns
        # started after it loaded, whichever branch they are on.
        "newest_turn_id": chat.turns.order_by("-pk").values_list("pk", flat=True).first() or 0,
        "efforts": Turn.Effort.choices,
        "last_effort": branch[-1].turn.research_effort if branch else Turn.Effort.STANDARD,
        "limits": page_limits(),
        "agent_label": agent_label(chat.provider),
        "read_only": chat.owner_id != request.user.pk,
        "sharing": chat_sharing(chat=chat, user=request.user),
        "usage_warning": usage_warning_this_month(user=request.user),  # shown under its turn
    }
    return render(request, "chats/chat_detail.html", context)


@require_POST
@login_required
def chat_branch_select(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    try:
        chat_select_branch(chat=chat, turn_id=int(request.POST.get("turn_id", "")))
    except (ValueError, TurnStartError):
        return JsonResponse(
            {"error": "That turn is not in this chat."}, status=HTTPStatus.BAD_REQUEST
        )
    if wants_json(request):
        return JsonResponse({"ok": True})
    return redirect("chat_detail", chat_id=chat.pk)


@require_GET
@login_required
def chat_export(request: HttpRequest, chat_id: int) -> HttpResponse:
    chat = chat_get_readable(user=request.user, chat_id=chat_id)
    turns = [item.turn for item in chat_branch(chat=chat)]
    response = HttpResponse(
        export_turns_markdown(turns), content_type="text/markdown; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="chat-{chat.pk}.md"'
    return response


STRUCTURED_FORMATS = {
    "csv": (structured_csv, "text/csv; charset=utf-8"),
    "json": (structured_json, "application/json"),
}


@require_GET
@login_required
def turn_structured_output(
    request: HttpRequest, chat_id: int, turn_id: int, fmt: str
) -> HttpResponse:
    """A turn's structured output as CSV or JSON; 404 for anyone who may not read the chat."""
    if fmt not in STRUCTURED_FORMATS:
        raise Http404
    chat = chat_get_readable(user=request.user, chat_id=chat_id)
    turn = get_object_or_404(Turn, pk=turn_id, chat=chat, structured_output__isnull=False)
    write, content_type = STRUCTURED_FORMATS[fmt]
    response = HttpResponse(write(turn.structured_output), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="turn-{turn.pk}-structured.{fmt}"'
    return response


@require_GET
@login_required
def turn_markdown(request: HttpRequest, chat_id: int, turn_id: int) -> HttpResponse:
    """A turn's cited answer as Markdown with its footnotes (the Copy button)."""
    chat = chat_get_readable(user=request.user, chat_id=chat_id)
    turn = get_object_or_404(Turn, pk=turn_id, chat=chat)
    markdown = render_markdown(cited_answer_for_turn(turn))
    return HttpResponse(markdown, content_type="text/markdown; charset=utf-8")
