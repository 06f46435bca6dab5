"""Websocket frames above the limit are refused by uvicorn itself, before they are buffered.

A real server process started the production way (`python -m researchsite.serve`), a signed-in
user, 20 sockets each sending one 8 MiB frame: the server's memory stays put and every frame is
refused with close code 1009 (message too big).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from researchsite.serve import uvicorn_args, ws_max_size
from tests.scaleout.sites import wait_until_serving
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024

pytestmark = pytest.mark.django_db(transaction=True)


def database_url() -> str:
    """The test database as a DATABASE_URL, for a server process to share it."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@contextmanager
def production_server(port: int, **extra_env: str):
    """Run the site as `make run` does (researchsite.serve), on the test database; yield its pid."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "researchsite.settings",
        "DATABASE_URL": database_url(),
        "SECRET_KEY": settings.SECRET_KEY,  # the session made here must verify there
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "WARNING",
        "WS_MAX_SOCKETS_PER_USER": "20",  # all 20 sockets open: the frame size is what is tested
        **extra_env,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "researchsite.serve", "--port", str(port)], cwd=ROOT, env=env
    )
    try:
        wait_until_serving(f"127.0.0.1:{port}", process, path="/login/")
        yield process.pid
    finally:
        process.terminate()
        process.wait(timeout=15)


def memory_bytes(pid: int, field: str) -> int:
    """Return VmRSS (resident now) or VmHWM (the peak resident) of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def test_the_production_command_limits_frames_to_the_applications_limit():
    args = uvicorn_args(host="127.0.0.1", port=8000)
    size = int(args[args.index("--ws-max-size") + 1])
    assert size == ws_max_size()
    assert settings.WEBSOCKET_MAX_FRAME_BYTES < size <= settings.WEBSOCKET_MAX_FRAME_BYTES + 8192


def test_twenty_8_mib_frames_are_refused_before_they_are_buffered(user, chat, session_cookie):
    port = free_port()
    with production_server(port) as pid:
        url = f"ws://127.0.0.1:{port}/ws/chats/{chat.pk}/"
        headers = {"Cookie": session_cookie}

        async def open_socket():
            return await connect(
                url,
                additional_headers=headers,
                origin=f"http://127.0.0.1:{port}",
                compression=None,
                max_size=None,
            )

        async def send_big_frame(socket) -> int | str:
            """Send 8 MiB; return the close code, or "served" if the application answered."""
            try:
                await socket.send("x" * (8 * MiB))
                await asyncio.wait_for(socket.recv(), timeout=10)
            except ConnectionClosed:
                await socket.wait_closed()
                return socket.close_code
            await socket.close()
            return "served"

        async def scenario() -> tuple[int, list[int | str]]:
            sockets = [await open_socket() for _ in range(20)]
            # A frame just over the application's limit still reaches the user's chat, which
            # answers with its own clear error frame.
            await sockets[0].send("x" * (settings.WEBSOCKET_MAX_FRAME_BYTES + 1024))
            assert json.loads(await sockets[0].recv())["type"] == "error"
            before = memory_bytes(pid, "VmRSS")
            # Every frame answered: the peak (VmHWM, read below) is behind us.
            codes = await asyncio.gather(*(send_big_frame(socket) for socket in sockets))
            return before, codes

        before, codes = asyncio.run(scenario())
        # The peak, not the figure afterwards: large buffers go back to the system once freed.
        grown = memory_bytes(pid, "VmHWM") - before

    assert grown < 150 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
    assert codes == [1009] * 20
