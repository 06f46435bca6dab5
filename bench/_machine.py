"""The machine a benchmark ran on, said the same way by every bench script."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """One line: cores, CPU model, Python, OS and the load average when the run started."""
    return (
        f"nproc {os.cpu_count()}, {cpu_model()}, Python {platform.python_version()} "
        f"({platform.python_implementation()}), {platform.system()} {platform.release()}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def git_commit() -> str:
    """The checked-out commit, short, and whether the work tree differs from it."""
    result = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"]).returncode
    return result.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
