"""The reference deployment, tested: Debian's nginx with deploy/nginx/researchsite.conf in
front of two workers on PostgreSQL and Redis, restarted one after the other (the recipe in
docs/DEPLOY.md) while answers stream through it. Every answer completes, whole and in order."""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import signal
import subprocess
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from django.test import Client

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, ScriptedAgent, answer_stream
from tests.scaleout.pages import Page
from tests.scaleout.sites import NEEDS_SERVICES, ROOT, Site, site_env, start_site, stop_site
from tests.servers import free_port, serve_asgi
from tests.waiting import wait_until_sync

NGINX = os.environ.get("NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
SITE_CONF = ROOT / "deploy" / "nginx" / "researchsite.conf"

pytestmark = [
    *NEEDS_SERVICES,
    pytest.mark.skipif(
        not os.access(NGINX, os.X_OK), reason="needs nginx (make test-services installs it)"
    ),
]

PAGES_PER_GROUP = 6  # three on each worker: nginx takes turns
TEXT = " ".join(f"word{i}" for i in range(30))
SITE_ENV = {"AGENT_MAX_CONCURRENT_TURNS": "20", "WS_MAX_SOCKETS_PER_USER": "30"}


def nginx_conf(tmp: Path, listen: int, workers: tuple[int, int]) -> Path:
    """The reference site as it is, on test ports, inside a minimal main configuration."""
    site = SITE_CONF.read_text()
    site = site.replace("listen 80;", f"listen 127.0.0.1:{listen};")
    site = site.replace("127.0.0.1:8001", f"127.0.0.1:{workers[0]}")
    site = site.replace("127.0.0.1:8002", f"127.0.0.1:{workers[1]}")
    site = site.replace("/srv/researchsite/staticfiles/", f"{ROOT / 'staticfiles'}/")
    (tmp / "site.conf").write_text(site)
    user = f"user {getpass.getuser()};" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {name}_temp_path {tmp / name};" for name in ("client_body", "proxy", "fastcgi")
    )
    main = tmp / "nginx.conf"
    main.write_text(
        f"""{user}
daemon off;
worker_processes 1;
pid {tmp / "nginx.pid"};
error_log {tmp / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
{temp}
    uwsgi_temp_path {tmp / "uwsgi"};
    scgi_temp_path {tmp / "scgi"};
    include {tmp / "site.conf"};
}}
"""
    )
    return main


@contextmanager
def running_nginx(tmp: Path, listen: int, workers: tuple[int, int]):
    conf = nginx_conf(tmp, listen, workers)
    subprocess.run([NGINX, "-t", "-c", str(conf)], check=True, capture_output=True)
    process = subprocess.Popen([NGINX, "-c", str(conf)])
    try:
        healthz = f"http://127.0.0.1:{listen}/healthz"
        wait_until_sync(lambda: process.poll() is not None or answers_ok(healthz), timeout=20)
        if process.poll() is not None:
            raise RuntimeError((tmp / "error.log").read_text())
        yield f"127.0.0.1:{listen}"
    finally:
        process.send_signal(signal.SIGQUIT)  # nginx's graceful stop
        process.wait(timeout=20)


def answers_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def wait_ready(host: str, timeout: float = 30) -> None:
    wait_until_sync(lambda: answers_ok(f"http://{host}/readyz"), timeout=timeout)


def restart(site: Site, env: dict[str, str]) -> Site:
    """The recipe's step for one worker: SIGTERM, wait for it to exit by itself (its answers
    done), start it again, wait until /readyz says 200."""
    site.process.send_signal(signal.SIGTERM)
    assert site.process.wait(timeout=60) in (0, -signal.SIGTERM)
    new = start_site(int(site.host.rsplit(":", 1)[1]), env)
    wait_ready(new.host)
    return new


def test_a_rolling_restart_behind_nginx_loses_no_answer(django_user_model, tmp_path):
    user = django_user_model.objects.create_user("analyst", password="pw-rolling-1")
    chats = [Chat.objects.create(owner=user) for _ in range(2 * PAGES_PER_GROUP)]
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    upstream = ScriptedAgent()
    for _ in chats:  # about 4.5 s each
        upstream.queue(Reply.events(*answer_stream(TEXT, pieces=30), pause=0.15))

    with ExitStack() as stack:
        agent = stack.enter_context(serve_asgi(upstream))
        env = site_env(f"{agent}/v1/research-agent", LOG_LEVEL="WARNING", **SITE_ENV)
        ports = (free_port(), free_port())
        sites = [start_site(port, env) for port in ports]
        stack.callback(lambda: [stop_site(site) for site in sites])
        proxy = stack.enter_context(running_nginx(tmp_path, free_port(), ports))

        async def start_streaming(pages: list[Page]) -> list[asyncio.Task]:
            following = [asyncio.create_task(page.ask_then_follow(proxy)) for page in pages]
            await asyncio.wait_for(asyncio.gather(*(p.streaming.wait() for p in pages)), 30)
            return following

        async def scenario() -> list[Page]:
            first = [Page(chat.pk, cookie) for chat in chats[:PAGES_PER_GROUP]]
            second = [Page(chat.pk, cookie) for chat in chats[PAGES_PER_GROUP:]]
            following = await start_streaming(first)
            # Worker one restarts while the first group of pages streams on both workers...
            sites[0] = await asyncio.to_thread(restart, sites[0], env)
            # ...and worker two while the second group streams on the new worker one and on it.
            following += await start_streaming(second)
            sites[1] = await asyncio.to_thread(restart, sites[1], env)
            await asyncio.wait_for(asyncio.gather(*following), 60)
            return first + second

        pages = asyncio.run(scenario())

    reconnected = [page for page in pages if page.close_codes]
    assert reconnected, "no page was on a restarted worker"
    assert all(page.close_codes == [1012] for page in reconnected)
    assert [page.refusals for page in pages] == [[]] * len(pages)  # nginx found a worker
    for page in pages:
        assert page.finished["status"] == "complete"
        assert page.seqs == list(range(1, len(page.seqs) + 1))
        assert page.answer == TEXT
    turns = Turn.objects.all()
    assert [turn.status for turn in turns] == ["complete"] * len(chats)
    assert all(turn.answer_text == TEXT for turn in turns)
