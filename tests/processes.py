"""Run a piece of Python in a fresh interpreter, for what only a new process shows (imports,
start-up state, settings read from the environment)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_output(code: str, env: dict[str, str] | None = None) -> str:
    """Run `code` with this interpreter at the repository's root; return what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout
