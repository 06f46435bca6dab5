"""The machine a benchmark ran on, said the same way by every bench script."""

from __future__ import annotations

import os
import platform
from pathlib import Path


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
