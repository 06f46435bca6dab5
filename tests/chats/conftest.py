"""Fixtures for the streaming spine: a stand-in upstream, users, chats, websocket clients."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import channel_layers, get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from chats.models import Chat
from chats.routing import websocket_urlpatterns
from chats.run.lifespan import shut_down
from demo_agent.scripted import DEFAULT_CHAT_ID, ScriptedAgent
from demo_agent.wire import sse_event
from tests.servers import serve_asgi


@pytest.fixture
def upstream(settings):
    """A scripted agent on a real loopback port; the site is pointed at it."""
    app = ScriptedAgent()
    with serve_asgi(app) as url:
        settings.RESEARCH_AGENT_URL = f"{url}/v1/research-agent"
        settings.BIGDATA_API_KEY = "test-key-not-a-secret-AAAA"
        settings.AGENT_MAX_RETRIES = 0
        settings.EVENT_FLUSH_INTERVAL = 0.01
        app.url = url
        yield app


@pytest.fixture
def site(transactional_db, settings, upstream):
    """The whole site (researchsite.asgi, its lifespan on: runs, the task worker, the MCP
    server) on a free port, asking the scripted stand-in."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    from researchsite.asgi import application

    channel_layers.backends.clear()  # the server thread's loop gets a layer of its own
    with serve_asgi(application, lifespan="on") as url:
        yield url
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
async def fresh_channel_layer():
    """A new layer and relay per test: each test has its own event loop, as have Redis pools.

    At the end, the server's own shut-down: nothing the test started (a run, a log write, an
    indexing pass) may outlive its loop and race the database's flush before the next test.
    """
    channel_layers.backends.clear()
    yield
    await shut_down()
    layer = get_channel_layer()
    await layer.flush()
    if hasattr(layer, "close_pools"):
        await layer.close_pools()
    channel_layers.backends.clear()


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("analyst", password="pw-analyst-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("intruder", password="pw-intruder-123")


@pytest.fixture
def chat(user):
    return Chat.objects.create(owner=user)


class Client:
    """A websocket client of the chat page's protocol."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.frames: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any]) -> None:
        await self.communicator.send_json_to(frame)

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        frame = await self.communicator.receive_json_from(timeout=timeout)
        self.frames.append(frame)
        return frame

    async def receive_until(
        self, kind: str, timeout: float = 15, turn_id: int | None = None
    ) -> list[dict]:
        """Receive frames until one of `kind` (for `turn_id`, if given); return all received."""
        got = []
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            frame = await self.receive(timeout=max(remaining, 0.01))
            got.append(frame)
            if frame["type"] == kind and (turn_id is None or frame.get("turn_id") == turn_id):
                return got

    async def close(self) -> None:
        await self.communicator.disconnect()


def events_of(frames: list[dict], turn_id: int | None = None) -> list[dict]:
    return [
        event
        for frame in frames
        if frame["type"] == "turn.events" and (turn_id is None or frame["turn_id"] == turn_id)
        for event in frame["events"]
    ]


@pytest.fixture
async def connect():
    """Connect a websocket client as `user` to `chat` (the URLRouter of the real site)."""
    opened: list[Client] = []

    async def _connect(user, chat, *, expect_close: int | None = None) -> Client:
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/chats/{chat.pk}/"
        )
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        client = Client(communicator)
        opened.append(client)
        if expect_close is not None:
            output = await communicator.receive_output(timeout=5)
            assert output == {"type": "websocket.close", "code": expect_close}
        return client

    yield _connect
    for client in opened:
        await client.close()


def sse(message: dict, chat_id: str = DEFAULT_CHAT_ID) -> bytes:
    """One event as the agent writes it, to mix with raw lines in a scripted reply."""
    return sse_event(chat_id, message)
