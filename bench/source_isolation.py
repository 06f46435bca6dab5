"""What hostile and slow cited pages cost the server: its memory and loop, and other users' checks.

    .venv/bin/python bench/source_isolation.py [--stall SECONDS] [--pages N]

The real site in this process (its websocket consumer, run, event log, checks and storage on a
fresh SQLite file; Gemini through its official SDK against the Gemini stand-in), the cited pages
on a real page server:

1. One answer citing a good page beside a page that kills its reader (the real reader, made to
   `os.abort()` its helper process for that page), a 1 GiB gzip bomb sent as `Content-Encoding:
   gzip, gzip` (1,827 bytes), the same bomb in one layer, a page declaring `charset=rot13` and
   `http://0177.0.0.1/x`. Shown: this process's memory rise (VmHWM, its peak resident set, reset
   before the check, less VmRSS before it; goal < 300 MB), the longest the event loop went
   without running a 10 ms ticker (another user's live answer waits that long), and what each
   claim's card says.
2. Two users: one answer citing `--pages` (48) pages that each stall `--stall` (12) seconds before
   their body, then another user's answer citing one fast page. Shown: the second answer's
   `turn.finished` to its `turn.checked` (goal < 15 s).
Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOMB = 1024**3  # bytes the bomb decodes to


def set_up() -> None:
    """Django on a fresh SQLite file (here, not at import: the page readers' helper processes
    import this module too)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="researchsite.settings",
        DATABASE_URL=f"sqlite:///{tempfile.mkdtemp(prefix='bench-source-isolation-')}/b.sqlite3",
        REDIS_URL="",
        LOG_LEVEL="ERROR",
        DEMO_AGENT_ENABLED="false",
    )
    import django

    django.setup()


def memory_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak_memory() -> None:
    """Make VmHWM start again from VmRSS (Linux: `5` to /proc/self/clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


async def ask(user, gemini, answer, question: str):
    """Ask as `user`; return the socket and the turn's id."""
    from channels.db import database_sync_to_async
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from chats.routing import websocket_urlpatterns
    from chats.services import chat_create

    gemini.queue(answer)
    chat = await database_sync_to_async(chat_create)(owner=user, provider="gemini")
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chats/{chat.pk}/")
    socket.scope["user"] = user
    await socket.connect()
    await socket.send_json_to({"type": "ask", "message": question})
    while True:
        frame = await socket.receive_json_from(timeout=60)
        if frame["type"] == "turn.started":
            return socket, frame["turn_id"]


async def until(socket, kind: str, turn_id: int, within: float = 120) -> dict:
    while True:
        frame = await socket.receive_json_from(timeout=within)
        if frame["type"] == kind and frame.get("turn_id") == turn_id:
            return frame


async def hostile_pages(user, gemini, site) -> None:
    from tests.standins.gemini import grounded_answer, stream
    from tests.standins.pages import ABORT_MARKER, ARTICLE_HTML, Page, gzip_bomb

    started = time.perf_counter()
    two_layers = await asyncio.to_thread(gzip_bomb, BOMB, 2)
    one_layer = await asyncio.to_thread(gzip_bomb, BOMB)
    print(
        f"the bomb: {len(two_layers):,} bytes as gzip, gzip; {len(one_layer):,} bytes as gzip;"
        f" {BOMB // 1024**2:,} MiB decoded (made in {time.perf_counter() - started:.0f} s)"
    )
    html = {"content-type": "text/html"}
    site.pages["/good"] = Page(body=ARTICLE_HTML)
    site.pages["/aborts"] = Page(body=ARTICLE_HTML + ABORT_MARKER.decode())
    site.pages["/bomb2"] = Page(body=two_layers, headers={**html, "content-encoding": "gzip, gzip"})
    site.pages["/bomb1"] = Page(body=one_layer, headers={**html, "content-encoding": "gzip"})
    site.pages["/rot13"] = Page(
        body="<p>Erirahr ebfr 12%.</p>", headers={"content-type": "text/html; charset=rot13"}
    )
    sources = [
        (f"{site.url}/good", "good"),
        (f"{site.url}/aborts", "aborts"),
        (f"{site.url}/bomb2", "bomb2"),
        (f"{site.url}/bomb1", "bomb1"),
        (f"{site.url}/rot13", "rot13"),
        ("http://0177.0.0.1/x", "octal"),
    ]
    sentences = [
        "Acme revenue rose 12% to $4.1 billion.",
        " Gross margin widened to 31.5%.",
        " Costs fell 3%.",
        " Debt fell 2%.",
        " Sales rose 9%.",
        " Staff grew 4%.",
    ]
    lags: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            lags.append(now - last - 0.01)
            last = now

    socket, turn_id = await ask(
        user, gemini, stream(*grounded_answer(sentences, sources)), "How did Acme do?"
    )
    await until(socket, "turn.finished", turn_id)
    before = memory_kb("VmRSS")
    reset_peak_memory()
    ticking = asyncio.create_task(ticker())
    checked = await until(socket, "turn.checked", turn_id)
    ticking.cancel()
    peak = memory_kb("VmHWM")
    await socket.disconnect()
    summary = checked["html"].split('claim-summary">')[1].split("<")[0]
    lines = [
        part.split(">", 1)[1].split("<")[0]
        for part in checked["html"].split('<p class="evidence-check ')[1:]
    ]
    print(f"summary: {summary}")
    for sentence, line in zip(sentences, lines, strict=True):
        print(f"  {sentence.strip()!r}: {line}")
    print(
        f"server memory (RSS): {before / 1024:.0f} MB before the check, peak {peak / 1024:.0f} MB"
        f" during it: rise {(peak - before) / 1024:.1f} MB (goal < 300 MB:"
        f" {'met' if peak - before < 300 * 1024 else 'NOT met'});"
        f" longest event-loop stall {max(lags) * 1000:.0f} ms"
    )


async def stalling_pages(users, gemini, site, *, pages: int, stall: float) -> None:
    from tests.standins.gemini import grounded_answer, stream
    from tests.standins.pages import ARTICLE_HTML, Page

    slow_user, fast_user = users
    for n in range(pages):
        site.pages[f"/stall/{n}"] = Page(body=ARTICLE_HTML, delay=stall)
    site.pages["/fast"] = Page(body=ARTICLE_HTML)
    slow_answer = stream(
        *grounded_answer(
            [f"Line {n} sales rose {n + 10}%. " for n in range(pages)],
            [(f"{site.url}/stall/{n}", f"stall{n}") for n in range(pages)],
        )
    )
    fast_answer = stream(
        *grounded_answer(
            ["Acme revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."],
            [(f"{site.url}/fast", "fast")],
        )
    )
    slow_socket, slow_turn = await ask(slow_user, gemini, slow_answer, "How did the lines do?")
    await until(slow_socket, "turn.finished", slow_turn)
    fast_socket, fast_turn = await ask(fast_user, gemini, fast_answer, "How did Acme do?")
    await until(fast_socket, "turn.finished", fast_turn)
    finished = time.perf_counter()
    checked = await until(fast_socket, "turn.checked", fast_turn)
    waited = time.perf_counter() - finished
    summary = checked["html"].split('claim-summary">')[1].split("<")[0]
    print(
        f"{pages} pages stalling {stall:g} s each in one user's answer, one fast page in"
        f" another's: the second answer's turn.finished to turn.checked {waited:.2f} s"
        f" (goal < 15 s: {'met' if waited < 15 else 'NOT met'}); its summary: {summary}"
    )
    slow = await until(slow_socket, "turn.checked", slow_turn, within=300)
    slow_summary = slow["html"].split('claim-summary">')[1].split("<")[0]
    print(
        f"the first answer's check ended {time.perf_counter() - finished:.0f} s after the"
        f" second's finish: {slow_summary}"
    )
    await slow_socket.disconnect()
    await fast_socket.disconnect()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=48, help="stalling pages of one answer")
    parser.add_argument("--stall", type=float, default=12.0, help="seconds each page stalls")
    args = parser.parse_args()

    from _machine import git_commit, machine
    from channels.db import database_sync_to_async
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from chats.agent.providers.gemini import load_sdk
    from chats.run.lifespan import shut_down
    from chats.verify import reading
    from tests.servers import serve_asgi
    from tests.standins.gemini import GeminiStandIn
    from tests.standins.pages import PageSite, read_or_abort

    await database_sync_to_async(call_command)("migrate", verbosity=0)
    users = [await get_user_model().objects.acreate(username=f"bench-{n}") for n in range(2)]
    await asyncio.to_thread(load_sdk)
    print(f"commit {await asyncio.to_thread(git_commit)}; {machine()}")
    reading.read_page = read_or_abort  # the real reader, aborting for the marked page

    gemini, site = GeminiStandIn(), PageSite()
    with serve_asgi(gemini) as gemini_url, serve_asgi(site) as site_url:
        site.url = site_url
        settings.GEMINI_API_KEY = "bench-not-a-secret"
        settings.GEMINI_BASE_URL = gemini_url
        settings.SOURCE_FETCH_ENABLED = True
        settings.SOURCE_FETCH_ALLOWED_HOSTS = [site_url.removeprefix("http://")]
        await hostile_pages(users[0], gemini, site)
        await stalling_pages(users, gemini, site, pages=args.pages, stall=args.stall)
        # The page server cancels the stalls no fetch waits for any more: no need to log it.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
    await shut_down()


if __name__ == "__main__":
    set_up()
    asyncio.run(main())
