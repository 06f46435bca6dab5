"""Shared parts of the benchmarks: the site's settings in a bench's own process
(`setup_django`), the best of repeated runs (`best_of`), Markdown tables (`table`), and, for the
streaming benchmarks, a stand-in agent, the real site, and its clients.

    .venv/bin/python bench/_site.py upstream PORT    # serve the stand-in agent (the benches do)

The stand-in agent is the tests' scripted agent (`demo_agent.scripted`), served by uvicorn in its
own process and told what to stream by the question itself, so the site needs no change:
"bench events=5000 rate=0" streams 5,000 events as fast as it can; "bench events=150 rate=50
stamp=1" paces 150 events at 50/s and starts each ANSWER's content with the wall-clock time it was
sent ("1712345678.123456|w3 "), which the page receives unchanged, so a client on the same
machine can tell the added latency.

The site runs as a real server (uvicorn or daphne) in a subprocess on a fresh database; every
client runs in the benchmark's own process, on one event loop. Loopback only. Not a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
PYTHON = str(BIN / "python") if (BIN / "python").exists() else sys.executable
sys.path.insert(0, str(ROOT))  # run from anywhere

from _machine import machine  # noqa: E402, F401  (the benches print bench.machine())

from demo_agent.scripted import ReceivedRequest, Reply, ScriptedAgent  # noqa: E402
from demo_agent.wire import sse_event  # noqa: E402

FINISH_GRACE = 5.0  # seconds to wait for turn.finished after the last event


# --- The site's code in the bench's own process ------------------------------------------------


def setup_django(**env: str) -> None:
    """Load the site's settings (with `env` set in the environment first) and set Django up, so
    that the site's modules can be imported and its database used in this process."""
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")
    import django

    django.setup()


def best_of(
    repeat: int,
    fn: Callable[[], object],
    *,
    before: Callable[[], object] | None = None,
    collector: bool = True,
) -> tuple[float, float]:
    """The best wall time and the best CPU time of `repeat` runs, in seconds, each run from a
    collected heap, after `before()` (emptying a cache, say).

    With `collector=False` the garbage collector is paused during each run, as `timeit` does:
    that isolates how the work itself grows from how often the collector re-walks the heap.
    """
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        gc.collect()
        if not collector:
            gc.disable()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            best_wall = min(best_wall, time.perf_counter() - wall)
            best_cpu = min(best_cpu, time.process_time() - cpu)
        finally:
            gc.enable()
    return best_wall, best_cpu


UPSTREAM_CHAT_ID = "chat-bench"


# --- What the stand-in agent says --------------------------------------------------------------


def question(*, events: int, rate: float = 0.0, stamp: bool = False) -> str:
    """The question that makes the stand-in stream `events` events at `rate`/s (0: flat out)."""
    return f"bench events={events} rate={rate:g} stamp={int(stamp)}"


def parse_question(text: str) -> dict[str, float]:
    spec = {"events": 100.0, "rate": 0.0, "stamp": 0.0}
    spec.update({k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", text)})
    return spec


def agent_messages(events: int) -> Iterator[dict[str, Any]]:
    """A research run of exactly `events` messages: mostly small ANSWER chunks, ending COMPLETE.

    PLANNING first, a few ACTIONs spread through, a PLANNING update, a GROUNDING whose references
    point into the answer, and COMPLETE; everything else is an ANSWER word ("w17 ").
    """
    plan = {"title": "Bench plan", "steps": [{"description": "Look", "status": "IN_PROGRESS"}]}
    fixed = 4  # PLANNING, PLANNING update, GROUNDING, COMPLETE
    actions = min(4, max(0, events - fixed - 1))
    answers = max(0, events - fixed - actions)
    every = max(1, answers // (actions + 1))
    yield {"type": "PLANNING", "plan": plan}
    answer_chars = 0
    sent_actions = 0
    for i in range(answers):
        if sent_actions < actions and i and i % every == 0:
            sent_actions += 1
            yield {
                "type": "ACTION",
                "tool_name": "search",
                "tool_arguments": {"query": f"bench query {sent_actions}"},
            }
        content = f"w{i} "
        answer_chars += len(content)
        yield {"type": "ANSWER", "message_id": "answer", "content": content}
    for _ in range(actions - sent_actions):
        yield {"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": "late"}}
    done = {"title": "Bench plan", "steps": [{"description": "Look", "status": "COMPLETED"}]}
    yield {"type": "PLANNING", "plan": done}
    source = {
        "type": "BIGDATA",
        "id": "doc-1",
        "hd": "Bench source",
        "src_name": "Bench",
        "ts": "2026-01-01T00:00:00Z",
        "url": "https://example.com/bench",
    }
    references = [
        {"start": s, "end": min(s + 20, answer_chars), "tool_name": "search", "source": source}
        for s in range(0, max(0, answer_chars - 20), max(1, answer_chars // 5))
    ][:5]
    yield {"type": "GROUNDING", "references": references}
    yield {"type": "COMPLETE", "checkpoint_id": "ckpt-bench", "consumption": []}


def bench_reply(request: ReceivedRequest) -> Reply:
    """The run the question asks for, paced at its rate; stamped as each event leaves, if asked."""
    spec = parse_question((request.json or {}).get("message", ""))
    messages = agent_messages(int(spec["events"]))
    if spec["stamp"]:
        # Lazy: the scripted agent takes the next event only after its pacing wait.
        messages = (stamped(message) for message in messages)
    return Reply(body=(sse_event(UPSTREAM_CHAT_ID, m) for m in messages), rate=spec["rate"])


def stamped(message: dict[str, Any]) -> dict[str, Any]:
    if message["type"] != "ANSWER":
        return message
    return {**message, "content": f"{time.time():.6f}|{message['content']}"}


# --- Processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:g} s")


def stop_process(process: subprocess.Popen, timeout: float = 15) -> None:
    """Stop one process we started: SIGINT (graceful for uvicorn and daphne), then SIGKILL.

    Its descendants (uvicorn's workers) are stopped by it; any still running after it has
    exited are sent SIGKILL, by process id.
    """
    children = {pid: _or_zero(_start_time, pid) for pid in descendants(process.pid)}
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    for pid, started in children.items():
        if started and _or_zero(_start_time, pid) == started:  # the same process, not a reuse
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name: [0] is state, [1] ppid."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _start_time(pid: int) -> int:
    return int(_stat_fields(pid)[19])


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(_stat_fields(int(entry.name))[1])
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
        parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def process_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def process_cpu_seconds(pid: int) -> float:
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_rss_kib(pid: int) -> int:
    """VmRSS of `pid` and all its descendants, summed (shared pages count once per process)."""
    return sum(_or_zero(process_rss_kib, p) for p in [pid, *descendants(pid)])


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` and all its live descendants, summed."""
    return sum(_or_zero(process_cpu_seconds, p) for p in [pid, *descendants(pid)])


def _or_zero(measure: Any, pid: int) -> Any:
    try:
        return measure(pid)
    except (OSError, IndexError, ValueError):
        return 0  # exited between the listing and the read


def self_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Upstream:
    """The stand-in agent, served by uvicorn (uvloop, httptools) in its own process.

    With `tls`, over HTTPS as the real agents are, with a certificate from a throwaway CA
    (trustme): while it runs, SSL_CERT_FILE names that CA for this process and the servers it
    starts (httpx's `create_ssl_context`, which the site's clients use, reads it).
    """

    def __init__(self, *, tls: bool = False) -> None:
        self.port = free_port()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/v1/research-agent"
        self.process: subprocess.Popen | None = None
        self._files: tempfile.TemporaryDirectory | None = None
        self._cert_file_before: str | None = None

    def __enter__(self) -> Upstream:
        command = [PYTHON, str(Path(__file__).resolve()), "upstream", str(self.port)]
        if self.tls:
            command += self._certificate()
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=None)
        wait_for_port(self.port, self.process, "the stand-in agent")
        return self

    def _certificate(self) -> list[str]:
        """Issue the stand-in's certificate; trust its CA; return uvicorn's cert and key files."""
        import trustme

        self._files = tempfile.TemporaryDirectory(prefix="researchsite-bench-tls-")
        folder = Path(self._files.name)
        authority = trustme.CA()
        issued = authority.issue_cert("127.0.0.1")
        authority.cert_pem.write_to_path(str(folder / "ca.pem"))
        issued.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
        issued.private_key_pem.write_to_path(str(folder / "key.pem"))
        self._cert_file_before = os.environ.get("SSL_CERT_FILE")
        os.environ["SSL_CERT_FILE"] = str(folder / "ca.pem")
        return [str(folder / "cert.pem"), str(folder / "key.pem")]

    def __exit__(self, *exc: object) -> None:
        if self.process:
            stop_process(self.process)
        if self._files is not None:
            if self._cert_file_before is None:
                os.environ.pop("SSL_CERT_FILE", None)
            else:
                os.environ["SSL_CERT_FILE"] = self._cert_file_before
            self._files.cleanup()

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.process.pid) if self.process else 0.0


# --- The database ------------------------------------------------------------------------------

# One analyst per chat, as 200 streaming chats would be in use: per-user limits and the per-user
# lock that counts a user's streaming turns stay as in production.
SETUP_SCRIPT = """
import json, sys
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from chats.models import Chat
User = get_user_model()
users = []
for i in range(CHATS):
    user = User(username=f"analyst{i}")
    user.set_unusable_password()
    users.append(user)
User.objects.bulk_create(users)
users = list(User.objects.filter(username__startswith="analyst").order_by("pk"))
Chat.objects.bulk_create([Chat(owner=user) for user in users])
chat_of = dict(Chat.objects.values_list("owner_id", "pk"))
pairs = []
for user in users:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    pairs.append([chat_of[user.pk], session.session_key])
print("BENCH" + json.dumps({"chats": pairs}))
"""


@dataclass
class Database:
    """A fresh database per server: SQLite in /tmp, or a PostgreSQL database made and dropped."""

    kind: str = "sqlite"  # or "postgres"
    name: str = ""
    url: str = ""
    _dir: str = ""

    def __post_init__(self) -> None:
        tag = f"bench_{os.getpid()}_{time.monotonic_ns() % 10**8}"
        if self.kind == "sqlite":
            self._dir = tempfile.mkdtemp(prefix="researchsite-bench-")
            self.name = str(Path(self._dir) / f"{tag}.sqlite3")
            self.url = f"sqlite:///{self.name}"
        else:
            self.name = tag
            self.url = f"postgres://postgres@127.0.0.1:5432/{tag}"
            _psql(f"CREATE DATABASE {tag}")

    def drop(self) -> None:
        if self.kind == "sqlite":
            shutil.rmtree(self._dir, ignore_errors=True)
        else:
            _psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def flush_redis(url: str) -> None:
    """Empty the Redis database of `url` (the bench uses its own db number)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def services_available() -> bool:
    """True when PostgreSQL and Redis answer on their default loopback ports."""
    for port in (5432, 6379):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                pass
        except OSError:
            return False
    return shutil.which("psql") is not None


# --- The site --------------------------------------------------------------------------------


@dataclass
class Account:
    chats: list[int]
    sessions: dict[int, str]  # chat id -> the session of the analyst who owns it


@dataclass
class Site:
    """The real site (`researchsite.asgi:application`) served by uvicorn or daphne.

    uvicorn runs as in production, `python -m researchsite.serve` (researchsite/serve.py), with
    `--workers N` when `workers` > 1; CPU and RSS then sum the master and all its workers.
    """

    server: str  # "uvicorn" or "daphne"
    upstream_url: str
    database: Database
    chats: int = 10
    workers: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    account: Account | None = None
    _next_chat: int = 0

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # loopback only
        env.update(
            DJANGO_SETTINGS_MODULE="researchsite.settings",
            DATABASE_URL=self.database.url,
            RESEARCH_AGENT_URL=self.upstream_url,
            DEMO_AGENT_ENABLED="false",
            BIGDATA_API_KEY="bench-dummy",
            AGENT_IDLE_TIMEOUT="60",
            ALLOWED_HOSTS="127.0.0.1",
            LOG_LEVEL="WARNING",
            REDIS_URL="",
        )
        env.update(self.extra_env)
        return env

    def command(self) -> list[str]:
        if self.server == "uvicorn":
            # The production command (`make run`, docs/DEPLOY.md): serve.py adds uvicorn's flags.
            return [
                *(PYTHON, "-m", "researchsite.serve"),
                *("--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"),
                *(["--workers", str(self.workers)] if self.workers > 1 else []),
            ]
        if self.workers > 1:
            raise ValueError("the bench runs daphne as one process only")
        return [
            str(BIN / "daphne"),
            *("-b", "127.0.0.1", "-p", str(self.port)),
            "-v",
            "0",  # no access log, like uvicorn's --no-access-log
            "researchsite.asgi:application",
        ]

    def command_line(self) -> str:
        shown = {
            "DATABASE_URL",
            "RESEARCH_AGENT_URL",
            "EVENT_FLUSH_INTERVAL",
            "EVENT_FLUSH_INTERVAL_MAX",
            "REDIS_URL",
            "RELAY_PREFIX",
        }
        env = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()) if k in shown and v)
        return f"{env} {' '.join(self.command())}".replace(str(ROOT) + "/", "")

    def prepare(self) -> None:
        """Migrate the fresh database and create one user, a session and the chats."""
        run = {"cwd": ROOT, "env": self.env, "check": True, "capture_output": True, "text": True}
        subprocess.run([PYTHON, "manage.py", "migrate", "--noinput"], **run)
        script = SETUP_SCRIPT.replace("CHATS", str(self.chats))
        out = subprocess.run([PYTHON, "manage.py", "shell", "-c", script], **run).stdout
        payload = json.loads(out.split("BENCH", 1)[1])
        pairs = payload["chats"]
        self.account = Account([c for c, _ in pairs], {c: sid for c, sid in pairs})

    def __enter__(self) -> Site:
        self.prepare()
        self.process = subprocess.Popen(
            self.command(), cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=None
        )
        wait_for_port(self.port, self.process, self.server)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process:
            stop_process(self.process)

    def take_chats(self, count: int) -> list[int]:
        """Fresh chats, so every measured turn is the first of its chat."""
        assert self.account is not None
        chats = self.account.chats[self._next_chat : self._next_chat + count]
        if len(chats) < count:
            raise RuntimeError(f"only {len(self.account.chats)} chats were created")
        self._next_chat += count
        return chats

    def rss_kib(self) -> int:
        """RSS of the server: the master and, with workers, every worker."""
        return tree_rss_kib(self.process.pid)

    def cpu_seconds(self) -> float:
        """CPU seconds of the server so far: the master and, with workers, every worker."""
        return tree_cpu_seconds(self.process.pid)


# --- Clients ---------------------------------------------------------------------------------


def install_uvloop() -> str:
    try:
        import uvloop
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


async def read_directly(upstream_url: str, events: int) -> tuple[float, int]:
    """Read and parse a run straight from the stand-in with the site's own parser."""
    import httpx

    from chats.agent.providers.bigdata import BigdataAdapter
    from chats.agent.sse import StreamReader, aiter_events

    # Not trust_env: no proxy on loopback. The stand-in's CA, when it serves TLS (Upstream).
    verify = httpx.create_ssl_context(trust_env=True)
    async with httpx.AsyncClient(trust_env=False, verify=verify, timeout=60) as client:
        started = time.perf_counter()
        count = 0
        payload = {"message": question(events=events), "research_effort": "standard"}
        async with client.stream("POST", upstream_url, json=payload) as response:
            reader = StreamReader(BigdataAdapter())
            async for _event in aiter_events(response.aiter_bytes(), reader):
                count += 1
        return time.perf_counter() - started, count


@dataclass
class TurnResult:
    elapsed: float = 0.0  # from sending "ask" to receiving turn.finished
    events: int = 0
    status: str = ""
    latencies: list[float] = field(default_factory=list)  # seconds, per stamped ANSWER
    sent_at: list[float] = field(default_factory=list)  # time.time() the stand-in sent each
    last_event_at: float = 0.0  # time.time() of the last event frame
    finished_at: float = 0.0  # time.time() turn.finished arrived; 0 if it never did
    first_event_after: float = float("inf")  # seconds from sending "ask" to the first event frame
    # time.time() the stand-in sent the turn's first event: its first stamped ANSWER's stamp,
    # less one pacing interval per event before it (0 when nothing was stamped)
    upstream_started_at: float = 0.0
    seqs_ok: bool = True  # every event's seq was the one after the last (from 1)
    compression: str = ""


class ChatSocket:
    """One page's websocket to one chat."""

    def __init__(self, site: Site, chat_id: int) -> None:
        self.site = site
        self.chat_id = chat_id
        self.ws = None

    async def open(self) -> None:
        from websockets.asyncio.client import connect

        assert self.site.account is not None
        self.ws = await connect(
            f"ws://127.0.0.1:{self.site.port}/ws/chats/{self.chat_id}/",
            origin=self.site.origin,
            additional_headers={"Cookie": f"sessionid={self.site.account.sessions[self.chat_id]}"},
            proxy=None,
            max_size=None,
            ping_interval=None,
            open_timeout=60,
        )

    async def ask(
        self, text: str, *, expected: int, stamped: bool = False, limit: float = 120
    ) -> TurnResult:
        """Ask, then read frames until turn.finished.

        Once all `expected` events are in, wait at most FINISH_GRACE seconds more for
        turn.finished: a lost final frame is reported as an outcome, not a hang.
        """
        result = TurnResult()
        extensions = self.ws.response.headers.get("Sec-WebSocket-Extensions", "")
        result.compression = extensions.split(";")[0] or "none"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        rate = parse_question(text)["rate"]
        started = time.perf_counter()
        await self.ws.send(
            json.dumps({"type": "ask", "message": text, "research_effort": "standard"})
        )
        last_seq = 0
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    raw = await self.ws.recv()
            except TimeoutError:
                result.status = "NO turn.finished" if result.events >= expected else "TIMEOUT"
                break
            now = time.time()
            frame = json.loads(raw)
            kind = frame.get("type")
            if kind == "turn.events":
                for event in frame["events"]:
                    result.events += 1
                    if event["seq"] != last_seq + 1:
                        result.seqs_ok = False
                    last_seq = event["seq"]
                    if stamped and event["type"] == "ANSWER":
                        sent = float(event["content"].split("|", 1)[0])
                        result.latencies.append(now - sent)
                        result.sent_at.append(sent)
                        if not result.upstream_started_at:
                            interval = 1 / rate if rate else 0.0
                            result.upstream_started_at = sent - (event["seq"] - 1) * interval
                if not result.last_event_at:
                    result.first_event_after = time.perf_counter() - started
                result.last_event_at = now
                if result.events >= expected:
                    deadline = min(deadline, loop.time() + FINISH_GRACE)
            elif kind == "turn.finished":
                result.status = frame["status"]
                result.finished_at = now
                break
            elif kind == "error":
                raise RuntimeError(f"the site refused the ask: {frame}")
        result.elapsed = time.perf_counter() - started
        return result

    @staticmethod
    def whole(result: TurnResult, expected: int) -> bool:
        """Every event exactly once, in order, and a turn.finished saying "complete"."""
        return result.seqs_ok and result.events == expected and result.status == "complete"

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


async def open_sockets(site: Site, chat_ids: list[int], batch: int = 25) -> list[ChatSocket]:
    sockets = [ChatSocket(site, chat_id) for chat_id in chat_ids]
    for start in range(0, len(sockets), batch):
        await asyncio.gather(*(s.open() for s in sockets[start : start + batch]))
    return sockets


@dataclass
class ConcurrentResult:
    chats: int
    events: int
    wall: float  # first ask sent → last event received
    events_per_second: float  # the pace the turns were relayed at (delivered_share)
    events_per_second_from_ask: float  # events / wall: also pays for every wait to start
    offered_per_second: float
    p50_ms: float
    p99_ms: float
    p99_steady_ms: float  # events sent from 1 s after the first ask on: no start-up burst
    max_ms: float
    first_event_p50_ms: float  # ask → first event frame, per chat
    first_event_p99_ms: float
    first_event_max_ms: float
    finish_gap_p99_ms: float  # last event → turn.finished, per turn that got one
    finish_gap_max_ms: float
    unfinished: int  # turns that never got turn.finished (not in the finish gap figures)
    whole_turns: int  # every event exactly once, in order, and turn.finished "complete"
    client_cpu_share: float  # of one core, over the run
    server_cpu_share: float  # master + workers
    upstream_cpu_share: float
    server_cpu_us_per_event: float  # server CPU over the run / events delivered
    server_rss_peak_kib: int  # master + workers
    statuses: dict[str, int]
    seqs_ok: bool
    timeline: list[TimelineRow] = field(default_factory=list)  # the run, window by window

    @property
    def delivered_share(self) -> float:
        """Delivered events/s over offered (chats x rate).

        Delivered is each turn's events over the time from the stand-in sending its first
        event to the page receiving its last, summed over the turns: the pace the site relays
        a stream at once it streams. That is how the goals count it (its 50-chat row
        delivers 2,511 of 2,500 events/s, which no count from the first ask can reach); the
        wait before a turn's first event is its own goal (ask → first event p99).
        """
        return self.events_per_second / self.offered_per_second


@dataclass(frozen=True)
class TimelineRow:
    """One window of a concurrent run, from the first ask: the ANSWER events the stand-in sent
    in it and their added latency, the server's CPU over it, and the turns that finished in it."""

    start: float  # seconds after the first ask
    events: int
    p50_ms: float
    p99_ms: float
    server_cores: float  # CPU seconds over the window's seconds (master + workers)
    finished: int


TIMELINE_WINDOW = 0.25  # seconds


def timeline(
    results: list[TurnResult], first_ask: float, cpu: list[tuple[float, float]]
) -> list[TimelineRow]:
    """The run in TIMELINE_WINDOW windows: where in a run its latency and its CPU go (the
    asks' burst, the streams, the answers ending together). `cpu`: (time.time(), the server's
    CPU seconds so far), sampled through the run."""
    latencies: dict[int, list[float]] = {}
    for r in results:
        for sent, latency in zip(r.sent_at, r.latencies, strict=True):
            latencies.setdefault(int((sent - first_ask) // TIMELINE_WINDOW), []).append(latency)
    finished: dict[int, int] = {}
    for r in results:
        if r.finished_at:
            window = int((r.finished_at - first_ask) // TIMELINE_WINDOW)
            finished[window] = finished.get(window, 0) + 1
    cores: dict[int, float] = {}
    for (t0, c0), (t1, c1) in itertools.pairwise(cpu):  # each interval to its middle's window
        window = int(((t0 + t1) / 2 - first_ask) // TIMELINE_WINDOW)
        cores[window] = cores.get(window, 0.0) + (c1 - c0)
    rows = []
    for window in range(max([*latencies, *finished, 0]) + 1):
        values = sorted(latencies.get(window, []))
        rows.append(
            TimelineRow(
                start=window * TIMELINE_WINDOW,
                events=len(values),
                p50_ms=percentile(values, 50) * 1000,
                p99_ms=percentile(values, 99) * 1000,
                server_cores=cores.get(window, 0.0) / TIMELINE_WINDOW,
                finished=finished.get(window, 0),
            )
        )
    return rows


async def concurrent_turns(
    site: Site,
    upstream: Upstream,
    *,
    chats: int,
    events: int,
    rate: float,
    rss_samples: list[int] | None = None,
) -> ConcurrentResult:
    """One websocket and one paced turn per chat, all at once; latency from stamped ANSWERs."""
    sockets = await open_sockets(site, site.take_chats(chats))
    samples: list[int] = rss_samples if rss_samples is not None else []
    cpu_samples: list[tuple[float, float]] = []  # (time.time(), the server's CPU seconds)

    async def sample_server() -> None:
        while True:
            samples.append(site.rss_kib())
            cpu_samples.append((time.time(), site.cpu_seconds()))
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample_server())
    try:
        cpu = (self_cpu_seconds(), site.cpu_seconds(), upstream.cpu_seconds())
        first_ask = time.time()
        started = time.perf_counter()
        text = question(events=events, rate=rate, stamp=True)
        results = await asyncio.gather(
            *(s.ask(text, expected=events, stamped=True) for s in sockets)
        )
        elapsed = time.perf_counter() - started
        client_cpu = self_cpu_seconds() - cpu[0]
        server_cpu = site.cpu_seconds() - cpu[1]
        upstream_cpu = upstream.cpu_seconds() - cpu[2]
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, *(s.close() for s in sockets), return_exceptions=True)
    latencies = sorted(x for r in results for x in r.latencies)
    steady = sorted(
        latency
        for r in results
        for sent, latency in zip(r.sent_at, r.latencies, strict=True)
        if sent >= first_ask + 1.0
    )
    total = sum(r.events for r in results)
    wall = max(r.last_event_at for r in results) - first_ask
    first_events = sorted(r.first_event_after for r in results)
    gaps = sorted(r.finished_at - r.last_event_at for r in results if r.finished_at)
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return ConcurrentResult(
        chats=chats,
        events=total,
        wall=wall,
        events_per_second=sum(
            r.events / (r.last_event_at - r.upstream_started_at)
            for r in results
            if r.upstream_started_at and r.last_event_at > r.upstream_started_at
        ),
        events_per_second_from_ask=total / wall,
        offered_per_second=chats * rate,
        p50_ms=percentile(latencies, 50) * 1000,
        p99_ms=percentile(latencies, 99) * 1000,
        p99_steady_ms=percentile(steady, 99) * 1000,
        max_ms=latencies[-1] * 1000 if latencies else float("nan"),
        first_event_p50_ms=median(first_events) * 1000,
        first_event_p99_ms=percentile(first_events, 99) * 1000,
        first_event_max_ms=first_events[-1] * 1000,
        finish_gap_p99_ms=percentile(gaps, 99) * 1000,
        finish_gap_max_ms=gaps[-1] * 1000 if gaps else float("nan"),
        unfinished=chats - len(gaps),
        whole_turns=sum(ChatSocket.whole(r, events) for r in results),
        client_cpu_share=client_cpu / elapsed,
        server_cpu_share=server_cpu / elapsed,
        upstream_cpu_share=upstream_cpu / elapsed,
        server_cpu_us_per_event=server_cpu / total * 1e6 if total else float("nan"),
        server_rss_peak_kib=max(samples) if samples else 0,
        statuses=statuses,
        seqs_ok=all(r.seqs_ok for r in results) and total == chats * events,
        timeline=timeline(results, first_ask, cpu_samples),
    )


async def one_long_turn(site: Site, events: int) -> TurnResult:
    (socket_,) = await open_sockets(site, site.take_chats(1))
    try:
        return await socket_.ask(question(events=events), expected=events)
    finally:
        await socket_.close()


# --- Reporting -------------------------------------------------------------------------------


def percentile(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


def invocation() -> str:
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(ROOT):
        script = script.relative_to(ROOT)
    return " ".join([".venv/bin/python", str(script), *sys.argv[1:]])


def table(
    headers: list[str],
    rows: list[list[Any]],
    text_columns: frozenset[int] = frozenset({0}),
    *,
    mark_alignment: bool = False,
) -> str:
    """A Markdown table, so the output pastes into the docs as is: text (`text_columns`)
    left-aligned, figures right-aligned. With `mark_alignment`, the rendered table is aligned
    so too (`---:` under each column of figures), and so is each header."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(row: list[str], *, head: bool = False) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if i in text_columns or (head and not mark_alignment) else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            + " |"
        )

    rule = "|" + "|".join(
        "-" * (w + 1) + ("-" if i in text_columns or not mark_alignment else ":")
        for i, w in enumerate(widths)
    )
    return "\n".join([line(headers, head=True), rule + "|", *(line(row) for row in cells)])


def main(argv: list[str]) -> None:
    if len(argv) in {3, 5} and argv[1] == "upstream":  # upstream PORT [CERT_FILE KEY_FILE]
        import uvicorn

        tls = {"ssl_certfile": argv[3], "ssl_keyfile": argv[4]} if len(argv) == 5 else {}
        uvicorn.run(
            ScriptedAgent(respond=bench_reply),
            host="127.0.0.1",
            port=int(argv[2]),
            log_level="warning",
            access_log=False,
            lifespan="on",
            **tls,
        )
        return
    print(__doc__)


if __name__ == "__main__":
    main(sys.argv)
