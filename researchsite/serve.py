"""The production server command, in one place: `python -m researchsite.serve --host H --port P`.

`make run` and the tests start the site through this, so the uvicorn flags the site relies on
cannot drift apart. Extra arguments are passed on to uvicorn (e.g. `--workers 2`).
"""

from __future__ import annotations

import argparse
import os

# Frames a little over the application's limit still reach it and get its clear error frame;
# anything larger is refused by uvicorn (close 1009) before it is buffered (up to 16 MiB).
WS_MAX_SIZE_HEADROOM = 4 * 1024


def ws_max_size() -> int:
    """Return the largest websocket message uvicorn accepts, in bytes."""
    from django.conf import settings

    return settings.WEBSOCKET_MAX_FRAME_BYTES + WS_MAX_SIZE_HEADROOM


def proxy_args() -> list[str]:
    """Trust X-Forwarded-For and X-Forwarded-Proto only from the proxies FORWARDED_ALLOW_IPS
    names, and from no one when it is empty.

    uvicorn's own default trusts them from 127.0.0.1: any local client could then pick its own
    address, and sign-in lock-outs are counted per address (researchsite/lockout.py).
    """
    from django.conf import settings

    if not settings.FORWARDED_ALLOW_IPS:
        return ["--no-proxy-headers"]
    return ["--proxy-headers", "--forwarded-allow-ips", settings.FORWARDED_ALLOW_IPS]


def uvicorn_args(*, host: str, port: int, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Return uvicorn's command-line arguments for serving the site."""
    return [
        "researchsite.asgi:application",
        *("--host", host, "--port", str(port)),
        *("--lifespan", "on"),  # start-up recovery of orphaned turns and the lease heartbeat
        *("--ws", "websockets-sansio"),
        *("--ws-per-message-deflate", "false"),  # docs/PERFORMANCE.md, "No websocket compression"
        *("--ws-max-size", str(ws_max_size())),
        *proxy_args(),
        "--no-access-log",
        *extra,
    ]


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchsite.settings")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    options, extra = parser.parse_known_args(argv)
    import uvicorn

    # uvicorn's own command line, in this process: signals from a process manager reach it.
    uvicorn.main.main(args=uvicorn_args(host=options.host, port=options.port, extra=extra))


if __name__ == "__main__":
    main()
