"""The API's event stream against the page's websocket: the server's CPU per relayed event.

    .venv/bin/python bench/api_stream.py [--parts A,B] [--rounds 5] [--chats 50] [--events 150]
                                         [--rate 50]

A. Delivery, in process (deterministic, CPU-bound; bench/stages.py's load and helpers): 200
   turns x 150 events in ticks of 300 events, as `chats.live.event_log._publish` frames them,
   published to one follower per chat through the real `LocalRelay`, timed by the event loop
   thread's own CPU time (time.thread_time: another process's load on a shared machine does not
   count) over the round, per event, median of `--rounds`:
   - websocket: bench/stages.py's "deliver" (a real `ChatConsumer`'s outbox, `_write_forever`,
     `_write`, the ASGI send) plus "ws-send" (websockets' `send_text` and `data_to_send`, what
     uvicorn's websockets-sansio does with each frame);
   - stream: a real `TurnEvents` (the API stream's outbox, the placement of each frame, its
     events cut from its text into one server-sent event each, `protocol.event_stream_text`,
     one chunk a frame) in its `EventStreamResponse`, sent by Django's own
     `ASGIHandler.send_response` to an ASGI send that frames each body chunk as uvicorn's HTTP/1.1
     chunked encoding does (each stream begun on a turn row with an empty log, untimed).
B. The served site (bench/streaming.py's part 2): one real site (`python -m researchsite.serve`,
   SQLite, the in-memory channel layer, 1 worker) and the scripted stand-in agent. In each round
   `--chats` chats each ask one paced turn (`--events` at `--rate`/s) at once, through the API
   (`POST /api/v1/chats/{id}/turns`, each chat's analyst with a token), each followed to its
   `turn.finished` one way, the ways taking turns round by round (so that none always runs on a
   warmer or busier machine):
   - ws: the page's way, its socket opened before the question is asked;
   - sse, asked: the question asked with `?stream=true`, its answer the turn's event stream
     (the chat followed from before the ask, as the page that asks follows it);
   - sse: `GET /api/v1/turns/{id}/events` once the question is asked: the events logged before
     it opens are read back from the log (each parsed and viewed again), as for a page opened on
     a streaming chat.
   A round's figure is the server's CPU time (/proc, uvicorn's process) over the round, from
   opening the sockets or asking, divided by the events its turns relayed: the turns' own cost
   (reading, parsing, logging, finishing) and the following's, per-turn costs included; each
   way's is the median of its rounds. Every turn must arrive whole (every event once, in order,
   then turn.finished "complete").

The ratios: the stream's CPU per event over the websocket's (A: the delivery path; B: the whole
server).
Not a test; nothing fails the process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _site as bench

TOKENS_SCRIPT = """
import json
from chats.api.services import api_token_create
from chats.models import Chat
tokens = {}
for chat in Chat.objects.select_related("owner"):
    tokens[chat.pk] = api_token_create(owner=chat.owner, name="bench", scopes=["read", "ask"])[1]
print("BENCH" + json.dumps(tokens))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="A,B", help="which parts to run")
    parser.add_argument("--chats", type=int, default=50, help="concurrent chats per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each way")
    parser.add_argument("--events", type=int, default=150, help="events per turn")
    parser.add_argument("--rate", type=float, default=50.0, help="events/s of each turn")
    return parser.parse_args()


def tokens_for(site: bench.Site) -> dict[int, str]:
    run = {"cwd": bench.ROOT, "env": site.env, "check": True, "capture_output": True, "text": True}
    command = [bench.PYTHON, "manage.py", "shell", "-c", TOKENS_SCRIPT]
    out = subprocess.run(command, **run).stdout
    return {int(chat): token for chat, token in json.loads(out.split("BENCH", 1)[1]).items()}


async def ask(client, token: str, chat: int, text: str) -> int:
    """Start the turn through the API: the same way for both ways of following it."""
    headers = {"Authorization": f"Bearer {token}"}
    asked = await client.post(
        f"/api/v1/chats/{chat}/turns", json={"question": text}, headers=headers
    )
    return asked.json()["id"]


async def by_websocket(socket: bench.ChatSocket, ask_turn, events: int) -> bool:
    """Follow the chat's page socket (opened before the ask) to turn.finished: every event
    once, in order."""
    await ask_turn()
    seq = 0
    while True:
        frame = json.loads(await socket.ws.recv())
        if frame["type"] == "turn.events":
            for event in frame["events"]:
                if event["seq"] != seq + 1:
                    return False
                seq += 1
        elif frame["type"] == "turn.finished":
            return frame["status"] == "complete" and seq == events


async def by_stream(client, token: str, ask_turn, events: int) -> bool:
    """Follow the turn's event stream to turn.finished: every event once, in order."""
    turn = await ask_turn()
    headers = {"Authorization": f"Bearer {token}"}
    async with client.stream("GET", f"/api/v1/turns/{turn}/events", headers=headers) as response:
        return await whole_stream(response, events)


async def by_asking_for_the_stream(client, token: str, chat: int, text: str, events: int) -> bool:
    """Ask with `stream=true`: the answer is the turn's event stream."""
    headers = {"Authorization": f"Bearer {token}"}
    url = f"/api/v1/chats/{chat}/turns?stream=true"
    async with client.stream("POST", url, json={"question": text}, headers=headers) as response:
        return await whole_stream(response, events)


async def whole_stream(response, events: int) -> bool:
    """Read an event stream to turn.finished: every event once, in order (its `id:`)."""
    seq, kind = 0, ""
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            if int(line[4:]) != seq + 1:
                return False
            seq += 1
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: ") and kind == "turn.finished":
            return json.loads(line[6:])["status"] == "complete" and seq == events
    return False


async def one_round(way: str, site, client, tokens, args) -> tuple[float, int, int]:
    """(server CPU seconds, events relayed, whole turns) of one round of `way`."""
    chats = site.take_chats(args.chats)
    text = bench.question(events=args.events, rate=args.rate)
    before = site.cpu_seconds()
    if way == "ws":
        sockets = await bench.open_sockets(site, chats)
        try:
            whole = await asyncio.gather(
                *(
                    by_websocket(s, lambda c=c: ask(client, tokens[c], c, text), args.events)
                    for s, c in zip(sockets, chats, strict=True)
                )
            )
        finally:
            await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
    elif way == "sse, asked":
        whole = await asyncio.gather(
            *(by_asking_for_the_stream(client, tokens[c], c, text, args.events) for c in chats)
        )
    else:
        whole = await asyncio.gather(
            *(
                by_stream(
                    client, tokens[c], lambda c=c: ask(client, tokens[c], c, text), args.events
                )
                for c in chats
            )
        )
    return site.cpu_seconds() - before, args.chats * args.events, sum(whole)


# --- A. Delivery, in process ------------------------------------------------------------------


async def stream_round(captured: list[list[tuple[int, Any]]], turns: list[Any]) -> float:
    """The frames of every tick through one API stream per chat (its real `frames`, begun on
    its empty log before the clock starts), to uvicorn's chunk framing."""
    from django.core.handlers.asgi import ASGIHandler

    from chats.api.stream import EventStreamResponse, TurnEvents
    from chats.live.relay import get_relay

    written: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        body = message.get("body", b"")
        if body:  # uvicorn's httptools protocol, a chunked body: size, chunk, CRLF
            written.append(b"".join([b"%x\r\n" % len(body), body, b"\r\n"]))

    handler = ASGIHandler()
    streams = [TurnEvents(turn, 0, 0, f"bench-{turn.pk}") for turn in turns]
    tasks = [
        asyncio.create_task(handler.send_response(EventStreamResponse(s), send)) for s in streams
    ]
    relay = get_relay()
    # Until every stream has read its (empty) log and waits on its outbox (asyncio.Event's own
    # list of waiters: a bench may look).
    while not all(stream.outbox._ready._waiters for stream in streams):  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    started = time.thread_time()
    for frames in captured:
        await relay.publish(frames)
        await asyncio.sleep(0)  # every stream runs once, sending what it was queued
    elapsed = time.thread_time() - started
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    events = sum(frame.last_seq - frame.first_seq + 1 for f in captured for _, frame in f)
    assert all(s.cursor == events // len(streams) for s in streams)
    # One server-sent event per event, one chunk per frame.
    assert sum(chunk.count(b'\ndata: {"seq":') for chunk in written) == events
    assert len(written) == sum(len(frames) for frames in captured)
    return elapsed / events


def bench_turns(count: int) -> list[Any]:
    """The turns `stages.capture_frames` frames (chats 1..count, turns 1000..): rows, so that
    a stream can begin as it does in the site."""
    from django.contrib.auth import get_user_model

    from chats.models import Chat, Turn

    owner = get_user_model().objects.create(username="bench")
    Chat.objects.bulk_create([Chat(pk=i + 1, owner=owner) for i in range(count)])
    turns = [Turn(pk=1000 + i, chat_id=i + 1, question="q") for i in range(count)]
    return Turn.objects.bulk_create(turns)


def delivery(args) -> dict[str, float]:
    import stages

    with tempfile.TemporaryDirectory(prefix="researchsite-api-stream-") as directory:
        stages.migrated_site(f"sqlite:///{directory}/bench.sqlite3")
        with asyncio.Runner(loop_factory=stages.new_loop) as runner:
            ticks = stages.pending_ticks([(i + 1, 1000 + i) for i in range(stages.TURNS)])
            captured = runner.run(stages.capture_frames(ticks))
            turns = bench_turns(stages.TURNS)
            figures = {"ws deliver": [], "stream": []}
            for _ in range(args.rounds):  # the two in turn, so neither runs on a warmer machine
                ws = stages.deliver_round(captured, clock=time.thread_time)
                figures["ws deliver"].append(runner.run(ws))
                figures["stream"].append(runner.run(stream_round(captured, turns)))
        ws_send = stages.median_round(
            args.rounds, lambda: stages.ws_send_round(captured, clock=time.thread_time)
        )
    result = {name: statistics.median(values) for name, values in figures.items()}
    result["ws send"] = ws_send
    result["ws"] = result["ws deliver"] + ws_send
    frames = sum(len(f) for f in captured)
    print(f"\n## A. Delivery, in process\n\n{stages.TURNS} turns x {stages.EVENTS} events,"
          f" {stages.TURNS * stages.EVENTS / frames:.2f} events per frame; median of"
          f" {args.rounds} rounds\n")  # fmt: skip
    rows = [
        ["websocket: ChatConsumer outbox to its send", f"{result['ws deliver'] * 1e6:.2f}"],
        ["websocket: websockets framing (uvicorn)", f"{ws_send * 1e6:.2f}"],
        ["websocket, in all", f"{result['ws'] * 1e6:.2f}"],
        [
            "API stream: TurnEvents, Django's send, chunk framing",
            f"{result['stream'] * 1e6:.2f}",
        ],
    ]
    print(bench.table(["path", "µs per event"], rows))
    print(f"\nStream / websocket, delivery per event: {result['stream'] / result['ws']:.2f}")
    return result


# --- B. The served site ----------------------------------------------------------------------


async def served(args, loop_name: str) -> None:
    import httpx

    ways = ["ws", "sse, asked", "sse"]
    print(f"\n## B. The served site ({loop_name} client)\n")
    print(f"{args.chats} chats a round, one turn each of {args.events} events at {args.rate:g}/s\n")
    figures: dict[str, list[float]] = {way: [] for way in ways}
    rows = []
    database = bench.Database()
    with bench.Upstream() as upstream:
        site = bench.Site(
            "uvicorn",
            upstream.url,
            database,
            chats=args.chats * (args.rounds * len(ways) + 1),  # a fresh chat for every turn
            extra_env={"WATCH_WORKER": "false"},  # no task worker polling the database
        )
        with site:
            tokens = tokens_for(site)
            for round_ in range(args.rounds + 1):  # the first warms up: imports, pools
                order = ways[round_ % 3 :] + ways[: round_ % 3]
                for way in order[:1] if round_ == 0 else order:
                    # A client per round: uvicorn closes connections idle for 5 s, and a POST
                    # sent on one it is closing is not retried.
                    async with httpx.AsyncClient(
                        base_url=site.origin, timeout=120, trust_env=False
                    ) as client:
                        cpu, events, whole = await one_round(way, site, client, tokens, args)
                    await asyncio.sleep(1)  # the finished turns' work (search index) settles
                    if round_ == 0:
                        continue
                    figures[way].append(cpu / events * 1e6)
                    per_event = f"{cpu / events * 1e6:.1f}"
                    rows.append([round_, way, per_event, f"{whole}/{args.chats}"])
    database.drop()
    print(bench.table(["round", "way", "server CPU µs/event", "whole turns"], rows))
    median = {way: statistics.median(values) for way, values in figures.items()}
    medians = [[way, f"{median[way]:.1f}"] for way in ways]
    print()
    print(bench.table(["way", "median server CPU µs/event"], medians))
    for way in ways[1:]:
        print(f"\n{way} / ws, server CPU per event: {median[way] / median['ws']:.2f}")


def main() -> None:
    args = parse_args()
    parts = set(args.parts.split(","))
    print(f"# The API's event stream vs the websocket\n\n{bench.machine()}")
    print(f"Command: `{bench.invocation()}`")
    if "A" in parts:
        delivery(args)
    if "B" in parts:
        asyncio.run(served(args, bench.install_uvloop()))


if __name__ == "__main__":
    began = time.perf_counter()
    main()
    print(f"\n(ran in {time.perf_counter() - began:.0f} s)")
