"""The HTML the live and run layers send pages is drawn by the page layer's templates, which the
app registers when it is ready: no module below the pages renders a template itself."""

from __future__ import annotations

import ast
from pathlib import Path

from chats.agent.events import PlanningEvent
from chats.live.fragments import fragments
from chats.live.protocol import event_view
from chats.pages.fragments import PAGE_FRAGMENTS

CHATS = Path(__file__).resolve().parents[3] / "chats"
# The packages below the page layer that send pages HTML (pyproject.toml, the layers).
BELOW_THE_PAGES = ["live", "run", "loop", "answer", "verify", "services.py", "selectors.py"]


def test_the_app_registers_the_page_layers_templates():
    assert fragments() is PAGE_FRAGMENTS
    steps = ({"description": "Read the filings", "status": "in_progress"},)
    view = event_view(3, PlanningEvent(title="Revenue <plan>", steps=steps))
    assert view["plan_html"] == PAGE_FRAGMENTS.plan("Revenue <plan>", steps)
    assert "Revenue &lt;plan&gt;" in view["plan_html"] and "Read the filings" in view["plan_html"]


def test_no_module_below_the_pages_renders_a_template():
    sources = [
        path
        for name in BELOW_THE_PAGES
        for path in ([CHATS / name] if name.endswith(".py") else (CHATS / name).rglob("*.py"))
    ]
    assert len(sources) > 20
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("django.template"), path
                names = {alias.name for alias in node.names}
                assert not (node.module == "django.shortcuts" and "render" in names), path
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("django.template") for a in node.names), path
