"""The helper processes that read fetched pages (`chats.verify.reading`), out of the server's.

A small pool of worker processes, started the first time a page is read (never at the server's
start, nor in a test that reads no page). Each worker's memory is capped (`MEMORY_BYTES` of
address space) and each page gets `SECONDS` to be read: a page that crashes its worker (a parser
aborting), needs more memory than the cap or more time than that ends that worker only, and
comes back as that page's problem, never as the server's or another page's.

The pool is pebble's `ProcessPool`: a worker that dies fails only the task it was running and
is replaced, and a task past its timeout has its worker ended. concurrent.futures'
ProcessPoolExecutor (and loky's) instead marks the whole pool broken when one worker dies,
failing every other page with it. Workers are spawned, not forked, so they inherit none of the
server's threads, sockets or locks.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as ReadTimeout

from pebble import ProcessExpired, ProcessPool

from chats.verify.reading import limit_process, read_page

logger = logging.getLogger(__name__)

WORKERS = 2
MEMORY_BYTES = 512 * 1024 * 1024
SECONDS = 5.0

Reader = Callable[[bytes, str, str, str], tuple[str, str]]


class PageReaders:
    """A pool of helper processes reading pages; started at its first page."""

    def __init__(
        self,
        *,
        workers: int = WORKERS,
        memory_bytes: int = MEMORY_BYTES,
        seconds: float = SECONDS,
    ) -> None:
        self.workers = workers
        self.memory_bytes = memory_bytes
        self.seconds = seconds
        self._pool: ProcessPool | None = None
        self._lock = threading.Lock()

    def _started(self) -> ProcessPool:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPool(
                    max_workers=self.workers,
                    initializer=limit_process,
                    initargs=(self.memory_bytes,),
                    context=multiprocessing.get_context("spawn"),
                )
            return self._pool

    async def read(
        self, body: bytes, kind: str, charset: str, url: str, *, reader: Reader = read_page
    ) -> tuple[str, str]:
        """Return (main text, "") or ("", why not) for one page, read in a helper process."""
        future = self._started().schedule(
            reader, args=(body, kind, charset, url), timeout=self.seconds
        )
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # ends its worker if it is running
            raise
        except ReadTimeout:
            return "", f"took longer than {self.seconds:g} s to read"
        except MemoryError:
            return "", f"needed more than {self.memory_bytes // (1024 * 1024)} MiB to read"
        except ProcessExpired as expired:
            logger.warning(
                "A page reader ended while reading %s (exit code %s)", url, expired.exitcode
            )
            return "", "it stopped the process reading it"
        except Exception as error:  # a parser's error on this page: this page's problem
            logger.warning("Reading %s failed: %r", url, error)
            return "", "its text could not be read"

    def close(self) -> None:
        """End the workers (the server is shutting down); the next read starts new ones."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
            pool.join()


_readers = PageReaders()


def page_readers() -> PageReaders:
    """This process's page readers."""
    return _readers
