"""Telling the analyst by e-mail (Django's e-mail backend), when WATCH_EMAIL is on: a watch
whose figures or sources changed, or one stopped after repeated failures. The app itself
always shows both, on the "Changes" page."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse

from chats.watch.models import Watch, WatchRun


def tell_analyst(*, run: WatchRun) -> None:
    if not settings.WATCH_EMAIL:
        return
    watch = run.watch
    owner = watch.owner
    if not owner.email:
        return
    question = " ".join(watch.turn.question.split())[:80]
    if run.state == WatchRun.State.CHANGED:
        subject = f"Changed: {question}"
        link = reverse("turn_compare", args=[watch.chat_id, run.turn_id])
        query = f"?a={run.previous_turn_id}&b={run.turn_id}"
        lines = [run.summary, run.figures, "", f"Compare: {settings.SITE_URL}{link}{query}"]
    elif watch.state == Watch.State.STOPPED and run.state == WatchRun.State.FAILED:
        subject = f"Watch stopped: {question}"
        lines = [
            f"The watch stopped after {watch.consecutive_failures} failed runs in a row.",
            f"The last one: {run.error}",
            "",
            f"Resume it on the Changes page: {settings.SITE_URL}{reverse('watch_changes')}",
        ]
    else:
        return
    send_mail(subject, "\n".join(lines), None, [owner.email])
