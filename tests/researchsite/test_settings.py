"""What researchsite/settings.py, where the site is put together, tells the site: the demo
agent's built-in workflow templates when it mounts the demo agent, and none otherwise."""

from __future__ import annotations

import json
import os

import pytest

from tests.processes import python_output

SCRIPT = (
    "import json, django; django.setup()\n"
    "from django.conf import settings\n"
    "print(json.dumps(settings.WORKFLOW_BUILTIN_TEMPLATES))\n"
)


@pytest.mark.parametrize(("enabled", "offered"), [("true", True), ("false", False)])
def test_the_demo_agents_templates_are_offered_when_it_is_mounted(enabled, offered):
    from demo_agent.workflows import BUILTIN_TEMPLATES

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env["DEMO_AGENT_ENABLED"] = enabled
    templates = json.loads(python_output(SCRIPT, env))
    expected = {
        tid: {"name": template.name, "inputs": list(template.inputs)}
        for tid, template in BUILTIN_TEMPLATES.items()
    }
    assert templates == (expected if offered else {})
    assert ("demo.earnings_brief" in templates) is offered
