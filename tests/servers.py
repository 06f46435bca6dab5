"""Real HTTP servers for tests: any ASGI app served by uvicorn on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve_asgi(app, *, port: int | None = None, lifespan: str = "off") -> Iterator[str]:
    """Serve `app` in a background thread and yield its base URL; stop it on exit."""
    port = port or free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan=lifespan,
        ws="websockets-sansio",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name=f"uvicorn-{port}")
    thread.start()
    deadline = time.monotonic() + 30  # a start-up may load provider SDKs (seconds under load)
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        # A server still running would race the test's database teardown.
        assert not thread.is_alive(), f"uvicorn on port {port} did not stop within 60 s"
