"""Pages of watches: set a watch on an answer, and the "Changes" page that lists them."""

from __future__ import annotations

from datetime import time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from chats.models import Turn
from chats.selectors import chat_get_for_user
from chats.watch.models import WEEKDAYS, Watch
from chats.watch.selectors import watch_get_for_user, watched_questions
from chats.watch.services import (
    WatchError,
    changes_mark_seen,
    watch_delete,
    watch_email_set,
    watch_pause,
)
from chats.watch.tasks import watch_create, watch_resume


@require_http_methods(["GET", "POST"])
@login_required
def watch_new(request: HttpRequest, chat_id: int, turn_id: int) -> HttpResponse:
    """ "Watch": re-run this answer every day or week, at a time of day."""
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    turn = get_object_or_404(Turn, pk=turn_id, chat=chat)
    error = ""
    if request.method == "POST":
        try:
            watch_create(
                owner=request.user,
                turn=turn,
                every=request.POST.get("every", ""),
                time_of_day=_time(request.POST.get("time_of_day", "")),
                weekday=_int(request.POST.get("weekday", "0")),
                # Offered, checked, where the site sends e-mail; on otherwise, for when it does.
                email_changes=request.POST.get("email_changes") == "1"
                if settings.WATCH_EMAIL
                else True,
            )
        except WatchError as refused:
            error = str(refused)
        else:
            return redirect("watch_changes")
    context = {
        "chat": chat,
        "turn": turn,
        "error": error,
        "every_choices": Watch.Every.choices,
        "weekdays": list(enumerate(WEEKDAYS)),
        "site_sends_email": settings.WATCH_EMAIL,
    }
    return render(request, "chats/watch_new.html", context, status=400 if error else 200)


@require_http_methods(["GET"])
@login_required
def watch_changes(request: HttpRequest) -> HttpResponse:
    """Each watched question with its latest change; seeing them clears the header's count."""
    watched = watched_questions(user=request.user)
    context = {"watched": watched, "site_sends_email": settings.WATCH_EMAIL}
    response = render(request, "chats/watch_changes.html", context)
    shown = [w.latest_change for w in watched] + [
        w.latest_run for w in watched if w.watch.state == Watch.State.STOPPED
    ]
    unseen = [run.pk for run in shown if run is not None and run.seen_at is None]
    changes_mark_seen(user=request.user, run_ids=unseen)
    return response


# The actions on one of the user's watches, by the name its URL passes (chats/watch/urls.py).
_WATCH_ACTIONS = {"pause": watch_pause, "resume": watch_resume, "delete": watch_delete}


@require_POST
@login_required
def watch_action(request: HttpRequest, watch_id: int, action: str) -> HttpResponse:
    """Pause, resume or delete a watch of the user's (404 for anyone else's)."""
    _WATCH_ACTIONS[action](watch=watch_get_for_user(user=request.user, watch_id=watch_id))
    return redirect("watch_changes")


@require_POST
@login_required
def watch_email(request: HttpRequest, watch_id: int) -> HttpResponse:
    """ "E-mail me when it changes", on or off, for a watch of the user's."""
    watch = watch_get_for_user(user=request.user, watch_id=watch_id)
    watch_email_set(watch=watch, email_changes=request.POST.get("email_changes") == "1")
    return redirect("watch_changes")


def _time(value: str) -> time:
    try:
        return time.fromisoformat(value)
    except ValueError as error:
        raise WatchError("Choose a time of day, such as 09:00.") from error


def _int(value: str) -> int:
    return int(value) if value.isascii() and value.isdigit() and len(value) < 3 else -1
