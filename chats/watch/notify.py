"""Telling the analyst by e-mail (Django's e-mail backend, EMAIL_URL), when the site sends
e-mail (WATCH_EMAIL) and the watch's "E-mail me when it changes" is on: a watch whose figures
or sources changed, or one stopped after repeated failures. The app itself always shows both,
on the "Changes" page.

Exactly one message per run: the run's `emailed_at` is claimed with one conditional UPDATE
before the message is sent, so a task that is retried, or two workers recording the same run,
send it once. A message the backend refused releases the claim (nothing was sent), so a retry
may send it. The address is the account's, which signing in through the identity provider
keeps equal to its `email` claim (researchsite/sso.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone

from chats.watch.models import Watch, WatchRun


@dataclass(frozen=True)
class Message:
    subject: str
    body: str


def tell_analyst(*, run: WatchRun) -> bool:
    """E-mail the watch's owner about this run if it is one to tell; True when a message went."""
    watch = run.watch
    if not (settings.WATCH_EMAIL and watch.email_changes):
        return False
    address = watch.owner.email
    message = run_message(run=run)
    if not address or message is None:
        return False
    claimed = WatchRun.objects.filter(pk=run.pk, emailed_at__isnull=True).update(
        emailed_at=timezone.now()
    )
    if not claimed:  # sent already: this is a retry
        return False
    try:
        send_mail(message.subject, message.body, None, [address])
    except Exception:
        WatchRun.objects.filter(pk=run.pk).update(emailed_at=None)  # not sent: a retry may
        raise
    return True


def run_message(*, run: WatchRun) -> Message | None:
    """The message about a run that changed or stopped its watch; None for any other run."""
    watch = run.watch
    question = " ".join(watch.turn.question.split())
    if run.state == WatchRun.State.CHANGED:
        return Message(f"Changed: {question[:80]}", _changed_body(run, question))
    if watch.state == Watch.State.STOPPED and run.state == WatchRun.State.FAILED:
        lines = [
            f"Your watch of “{question}” stopped after {watch.consecutive_failures} failed"
            " runs in a row.",
            f"The last one: {run.error}",
            "",
            f"Resume it on the Changes page: {settings.SITE_URL}{reverse('watch_changes')}",
        ]
        return Message(f"Watch stopped: {question[:80]}", "\n".join(lines))
    return None


def _changed_body(run: WatchRun, question: str) -> str:
    comparison = run.comparison or {}
    lines = [f"The answer to “{question}” changed: {run.summary}.", ""]
    moved = comparison.get("figures_changed", [])
    if moved:
        lines.append(f"Figures that moved: {run.figures}")
        lines += [f"- {c['before']} → {c['after']}: {c['claim']}" for c in moved]
    for key, title in (("figures_added", "Figures added"), ("figures_gone", "Figures gone")):
        if comparison.get(key):
            lines.append(
                f"{title}: " + ", ".join(c["after"] or c["before"] for c in comparison[key])
            )
    for key, title in (("sources_added", "Sources added"), ("sources_dropped", "Sources dropped")):
        if comparison.get(key):
            lines.append(f"{title}:")
            lines += [
                f"- {s['label']}" + (f" ({s['url']})" if s["url"] else "") for s in comparison[key]
            ]
    link = reverse("turn_compare", args=[run.watch.chat_id, run.turn_id])
    query = f"?a={run.previous_turn_id}&b={run.turn_id}"
    lines += ["", f"Compare the two versions: {settings.SITE_URL}{link}{query}"]
    return "\n".join(lines)
