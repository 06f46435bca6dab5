"""Run watches now: `run_watches --all` every active watch, `run_watches` the due ones.

Each watch is claimed as a scheduled run claims it (`chats.watch.tasks.watch_claim`), so a
watch a worker is running at that moment is not run a second time.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.utils import timezone

from chats.watch.models import Watch
from chats.watch.tasks import run_claimed, watch_claim


class Command(BaseCommand):
    help = "Re-run watched questions now and compare each new version with the previous one."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--all", action="store_true", help="Run every active watch, due or not."
        )

    def handle(self, *args, **options) -> None:
        ids = Watch.objects.filter(state=Watch.State.ACTIVE).order_by("pk")
        if not options["all"]:  # the claim checks again: another worker may take one first
            ids = ids.filter(next_run_at__lte=timezone.now())
        claimed = [
            watch
            for watch_id in ids.values_list("pk", flat=True)
            if (watch := watch_claim(watch_id=watch_id, due_only=not options["all"]))
        ]
        if not claimed:
            self.stdout.write("No watch to run.")
            return
        for watch, outcome in zip(claimed, run_claimed(claimed), strict=True):
            self.stdout.write(f"Watch {watch.pk}: {outcome}")
