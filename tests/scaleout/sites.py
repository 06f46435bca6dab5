"""Site processes for the tests that need more than one: each a real server process (the
production command, `python -m researchsite.serve`) on the test database and Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings
from django.db import connection

from tests.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[2]

# The marks of a test that needs the real services: `make test-services` runs it.
NEEDS_SERVICES = [
    pytest.mark.scaleout,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not (
            os.environ.get("TEST_DATABASE_URL", "").startswith("postgres")
            and os.environ.get("REDIS_URL")
        ),
        reason="needs TEST_DATABASE_URL=postgres://… and REDIS_URL (make test-services runs it)",
    ),
]


@dataclass
class Site:
    host: str  # "127.0.0.1:port"
    process: subprocess.Popen
    log_path: Path | None = None

    def log_lines(self) -> list[str]:
        return self.log_path.read_text().splitlines() if self.log_path else []


def site_env(agent_url: str, **overrides: str) -> dict[str, str]:
    db = connection.settings_dict
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "researchsite.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SECRET_KEY": django_settings.SECRET_KEY,  # sessions made here must verify there
        "RESEARCH_AGENT_URL": agent_url,
        "BIGDATA_API_KEY": "scaleout-test-key",
        "DEMO_AGENT_ENABLED": "false",
        "ALLOWED_HOSTS": "127.0.0.1",
        "EVENT_FLUSH_INTERVAL": "0.02",
        **overrides,
    }


def wait_until_serving(
    host: str, process: subprocess.Popen, timeout: float = 30, path: str = "/healthz"
) -> None:
    """Wait until the site answers `path` (a page, rather than /healthz, has loaded Django's
    views too)."""

    def answers() -> bool:
        try:
            httpx.get(f"http://{host}{path}", timeout=1)
        except httpx.TransportError:
            return False
        return True

    wait_until_sync(lambda: answers() or process.poll() is not None, timeout, f"the site at {host}")
    if process.poll() is not None:
        raise RuntimeError(f"the site at {host} exited before it served")


def start_site(port: int, env: dict[str, str], log_path: Path | None = None) -> Site:
    """Start the site on `port`; its output goes to `log_path` (or the test's own)."""
    log = open(log_path, "ab") if log_path else None  # noqa: SIM115 (the process holds it)
    process = subprocess.Popen(
        [sys.executable, "-m", "researchsite.serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT if log else None,
    )
    if log:
        log.close()  # the child has its own copy
    site = Site(f"127.0.0.1:{port}", process, log_path)
    wait_until_serving(site.host, process)
    return site


def stop_site(site: Site, timeout: float = 60) -> None:
    if site.process.poll() is None:
        site.process.send_signal(signal.SIGTERM)
        try:
            site.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            site.process.kill()
            site.process.wait()


@contextmanager
def running_site(
    port: int, agent_url: str, log_path: Path | None = None, **env: str
) -> Iterator[Site]:
    site = start_site(port, site_env(agent_url, **env), log_path)
    try:
        yield site
    finally:
        stop_site(site)


@contextmanager
def site_process(port: int, agent_url: str, **env: str) -> Iterator[str]:
    """Run the site in its own server process against the test database and Redis."""
    with running_site(port, agent_url, **{"LOG_LEVEL": "WARNING", **env}) as site:
        yield site.host
