"""/healthz, /readyz and /metrics of a real server process (the production command).

A process whose database cannot be opened starts all the same, answers /healthz, says on
/readyz that the database is unreachable, and becomes ready by itself once the database is
there and migrated. SQLite stands in for a database that comes back: its folder is missing
at start-up, then created, then migrated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

from tests.scaleout.sites import ROOT, start_site, stop_site
from tests.servers import free_port
from tests.waiting import wait_until_sync

TOKEN = "metrics-token-for-tests"


def readiness(host: str) -> tuple[int, dict]:
    response = httpx.get(f"http://{host}/readyz", timeout=10)
    return response.status_code, response.json()


def test_a_process_without_its_database_serves_probes_and_becomes_ready_by_itself(tmp_path):
    folder = tmp_path / "not-yet"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "researchsite.settings",
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
        "SECRET_KEY": "operations-test-secret",
        "REDIS_URL": "",
        "LOG_FORMAT": "json",
        "METRICS_ALLOWED_IPS": "10.0.0.0/8",  # not the test's own address
        "METRICS_TOKEN": TOKEN,
    }
    log = tmp_path / "site.log"
    site = start_site(free_port(), env, log)
    try:
        health = httpx.get(f"http://{site.host}/healthz", timeout=5)
        assert health.status_code == 200
        assert readiness(site.host) == (503, {"database": "unreachable", "process": "serving"})

        folder.mkdir()  # the database can be opened now, but holds no tables
        wait_until_sync(
            lambda: readiness(site.host)[1]["database"] == "migrations_pending", timeout=30
        )
        assert readiness(site.host)[0] == 503

        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
        wait_until_sync(lambda: readiness(site.host)[0] == 200, timeout=30)
        assert readiness(site.host) == (200, {"database": "ok", "process": "serving"})

        # /metrics: only for the allowed addresses, or with the token.
        url = f"http://{site.host}/metrics"
        assert httpx.get(url, timeout=5).status_code == 403
        wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=5)
        assert wrong.status_code == 403
        allowed = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        assert allowed.status_code == 200
        assert allowed.headers["content-type"].startswith("text/plain")
        assert "researchsite_open_websockets 0.0" in allowed.text
        assert "process_cpu_seconds_total" in allowed.text  # the process collector
    finally:
        stop_site(site)

    lines = site.log_lines()
    assert lines, "the process logged nothing"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= record.keys() for record in records)
    assert any(record["logger"] == "uvicorn.error" for record in records)  # uvicorn's too
