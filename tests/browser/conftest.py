"""Real Chromium (Debian's) driving the real site served by uvicorn on a loopback port."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from channels.layers import channel_layers

from demo_agent.scripted import ScriptedAgent
from tests.servers import serve_asgi

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread, so Django would refuse
    # the test's own (synchronous) database calls. Allowed only while a browser module runs;
    # the rest of the suite keeps the check, and the server never calls the ORM from async code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def site(transactional_db, settings):
    """The whole site (researchsite.asgi) with its built-in demo agent, on a free port."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    from researchsite.asgi import application

    # Each server thread runs its own event loop; channels_redis keeps per-loop state, so each
    # gets a fresh layer.
    channel_layers.backends.clear()
    with serve_asgi(application, lifespan="on") as url:
        settings.RESEARCH_AGENT_URL = f"{url}{settings.DEMO_AGENT_PATH}"  # its own demo agent
        yield url
    channel_layers.backends.clear()


@pytest.fixture
def upstream(settings):
    """A scripted agent on a real loopback port, in place of the site's demo agent (ask for it
    after `site`, which points the site at its own demo agent)."""
    app = ScriptedAgent()
    with serve_asgi(app) as url:
        settings.RESEARCH_AGENT_URL = f"{url}/v1/research-agent"
        app.url = url
        yield app


def open_page(browser, *, viewport: dict, scheme: str = "light", touch: bool = False):
    """A page in a context of its own; its script errors collect in `page.js_errors`."""
    context = browser.new_context(
        viewport=viewport, color_scheme=scheme, has_touch=touch, is_mobile=touch
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.js_errors = errors
    return page


@pytest.fixture
def page(browser, request):
    page = open_page(browser, viewport={"width": 1200, "height": 900})
    yield page
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    page.context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def analyst(django_user_model):
    return django_user_model.objects.create_user("analyst", password="correct-horse-42")


def log_in(page, site: str, username: str = "analyst", password: str = "correct-horse-42") -> None:
    page.goto(f"{site}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r".*/$"))


def new_chat(page) -> None:
    page.get_by_role("button", name="New chat").first.click()
    page.wait_for_url(re.compile(r".*/chats/\d+/$"))


def ask(page, question: str, *, effort: str | None = None) -> None:
    box = page.get_by_label("Message")
    box.fill(question)
    if effort:
        page.get_by_label("Research effort").select_option(effort)
    box.press("Enter")


def wait_for_answer(page, turn_index: int = -1, timeout: float = 30_000):
    """Wait until the turn at `turn_index` has finished streaming; return its locator."""
    page.wait_for_function(
        "(i) => { const t = [...document.querySelectorAll('.turn')].at(i);"
        " return t && t.dataset.status !== 'streaming'; }",
        arg=turn_index,
        timeout=timeout,
    )
    return page.locator(".turn").nth(
        turn_index if turn_index >= 0 else page.locator(".turn").count() - 1
    )
