"""Real HTTP servers for tests: any ASGI app served by uvicorn on a free loopback port."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from tests.waiting import wait_until_sync


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve_asgi(app, *, lifespan: str = "off") -> Iterator[str]:
    """Serve `app` in a background thread and yield its base URL; stop it on exit.

    The listening socket is bound here and handed to the server, so that no other test process
    (`make test` runs two) can take its port between choosing it and listening on it.
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan=lifespan,
        ws="websockets-sansio",
        # A stream the test has walked away from (a stand-in agent still pacing its script, a
        # page left open) gets a second to end at shut-down, then is cancelled.
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"uvicorn-{port}"
    )
    thread.start()
    # A start-up may load provider SDKs (seconds under load).
    wait_until_sync(lambda: server.started or not thread.is_alive(), timeout=30)
    assert server.started, f"uvicorn did not start on port {port}"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()
        # A server still running would race the test's database teardown.
        assert not thread.is_alive(), f"uvicorn on port {port} did not stop within 60 s"
