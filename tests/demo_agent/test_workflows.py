"""The demo agent's Workflows endpoint: a run replayed from its start when it is resumed by its
execution_id, and its refusals."""

from __future__ import annotations

import json
from http import HTTPStatus

import httpx

from demo_agent import DemoAgentApp
from tests.servers import serve_asgi


def test_the_demo_agent_replays_an_execution_on_resume():
    with serve_asgi(DemoAgentApp("secret", pace=0)) as url:
        endpoint = f"{url}/v1/workflow/execute"
        body = {"template": "demo.risk_scan", "input": {"company": "Tesla"}}
        with httpx.stream("POST", endpoint, json=body, timeout=30) as response:
            assert response.status_code == HTTPStatus.OK
            lines = response.iter_lines()
            seen = []
            for line in lines:
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                if len(seen) == 3:
                    break  # leave mid-stream
        execution_id = seen[0]["execution_id"]
        assert all(set(e) == {"request_id", "execution_id", "delta"} for e in seen)
        resumed = httpx.post(endpoint, json={**body, "execution_id": execution_id}, timeout=30)
        replay = [json.loads(x[6:]) for x in resumed.text.splitlines() if x.startswith("data: ")]
        assert [e["delta"] for e in replay[:3]] == [e["delta"] for e in seen]
        assert replay[-1]["delta"]["type"] == "COMPLETE"
        assert {e["execution_id"] for e in replay} == {execution_id}
        assert replay[0]["request_id"] != seen[0]["request_id"]
        other = {"template": "demo.earnings_brief", "execution_id": execution_id}
        assert httpx.post(endpoint, json=other, timeout=30).status_code == HTTPStatus.CONFLICT
        unknown = {"execution_id": "exec-nope"}
        assert httpx.post(endpoint, json=unknown, timeout=30).status_code == HTTPStatus.NOT_FOUND
        missing = {"template": "demo.risk_scan"}
        assert httpx.post(endpoint, json=missing, timeout=30).status_code == 422
