"""Run the demo agent on its own: `python -m demo_agent --port 8001`.

The secret comes from DEMO_AGENT_SECRET (a random one by default, so ids last one run) and the
pace from DEMO_AGENT_PACE (1.0 human pace, 0 as fast as possible).
"""

from __future__ import annotations

import argparse
import os
import secrets

from demo_agent.app import DemoAgentApp


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m demo_agent", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument(
        "--pace", type=float, default=float(os.environ.get("DEMO_AGENT_PACE", "1.0"))
    )
    args = parser.parse_args(argv)

    import uvicorn  # the site's ASGI server; only this entry point needs it

    secret = os.environ.get("DEMO_AGENT_SECRET") or secrets.token_urlsafe(32)
    app = DemoAgentApp(secret, pace=args.pace)
    print(f"Demo agent: POST http://{args.host}:{args.port}/v1/research-agent")
    uvicorn.run(app, host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
