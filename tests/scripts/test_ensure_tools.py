"""scripts/ensure-chromium and scripts/ensure-nginx: find the tool, install Debian's package when
root can, else stop with one clear line. The two scripts follow one recipe, so one set of tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

# (script, the variable that names the binary, Debian's package)
TOOLS = [("ensure-chromium", "CHROMIUM", "chromium"), ("ensure-nginx", "NGINX", "nginx")]

pytestmark = pytest.mark.parametrize(("script", "variable", "package"), TOOLS)


def run(
    tmp_path: Path, script: str, variable: str, binary: Path, *, uid: int
) -> subprocess.CompletedProcess:
    """Run the script with stand-in `id` and `apt-get` first on PATH (never the real apt-get)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stubs = {
        "id": f"echo {uid}",
        # A successful install puts the binary where Debian's package would.
        "apt-get": f'echo "$@" >> {tmp_path}/apt.log; [ "$1" = install ] && '
        f"printf '#!/bin/sh\\n' > {binary} && chmod +x {binary}; exit 0",
    }
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", variable: str(binary)}
    return subprocess.run([SCRIPTS / script], env=env, capture_output=True, text=True, timeout=30)


def test_an_existing_binary_is_printed_and_nothing_installed(tmp_path, script, variable, package):
    binary = tmp_path / package
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    result = run(tmp_path, script, variable, binary, uid=0)
    assert result.returncode == 0
    assert result.stdout == f"{binary}\n"
    assert not (tmp_path / "apt.log").exists()


def test_root_with_apt_get_installs_debians_package(tmp_path, script, variable, package):
    binary = tmp_path / package
    result = run(tmp_path, script, variable, binary, uid=0)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{binary}\n"  # only the path: apt's output went to stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq",
        f"install -y -qq {package}",
    ]


def test_without_root_it_stops_with_one_line_naming_the_command(
    tmp_path, script, variable, package
):
    binary = tmp_path / package
    result = run(tmp_path, script, variable, binary, uid=1000)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert f"apt-get install -y {package}" in result.stderr
    assert not (tmp_path / "apt.log").exists()
