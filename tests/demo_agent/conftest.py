from collections.abc import Iterator

import pytest

from demo_agent import DemoAgentApp
from tests.servers import serve_asgi

SECRET = "test-demo-agent-secret"


@pytest.fixture(scope="module")
def agent_url() -> Iterator[str]:
    """A demo agent at pace 0 behind a real HTTP server, shared by a module's tests."""
    with serve_asgi(DemoAgentApp(SECRET, pace=0)) as url:
        yield f"{url}/v1/research-agent"
