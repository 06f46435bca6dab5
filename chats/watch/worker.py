"""django-tasks' database worker, run in a thread of the server so that `make run` (one
command, one process) also runs the watches; WATCH_WORKER=false leaves them to separate
`manage.py db_worker` processes. The worker's task hands each watch's run to the server's
event loop (`runs.server_loop`), where the page's own runs go."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

from django.db import connections
from django_tasks_db.management.commands.db_worker import Worker

from chats.watch import runs

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
_worker: Worker | None = None
_thread: threading.Thread | None = None


def start_watch_worker() -> None:
    """Start the worker thread, handing runs to the running event loop (ASGI start-up)."""
    global _worker, _thread
    runs.server_loop = asyncio.get_running_loop()
    _worker = Worker(
        queue_names=["default"],
        interval=POLL_SECONDS,
        batch=False,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id=f"server-{os.getpid()}",
        excluded_queue_names=[],
    )
    _thread = threading.Thread(target=_work, args=(_worker,), daemon=True, name="watch-worker")
    _thread.start()


def _work(worker: Worker) -> None:
    try:
        worker.run()
    except Exception:
        logger.exception("The watch worker stopped")
    finally:
        connections.close_all()  # this thread's own connection


async def stop_watch_worker() -> None:
    """Ask the worker to stop after its current task, and wait a moment for it (shutdown)."""
    global _thread
    if _worker is not None:
        _worker.running = False
    if _thread is not None:
        await asyncio.to_thread(_thread.join, 2 * POLL_SECONDS + 1)
        _thread = None
    runs.server_loop = None
