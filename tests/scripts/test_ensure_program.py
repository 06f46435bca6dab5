"""scripts/ensure-program, as the Makefile calls it for Chromium and nginx: find the program,
install Debian's package when root can, else stop with one clear line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-program"

# (the variable that names the binary, the program and Debian's package), as in the Makefile
TOOLS = [("CHROMIUM", "chromium"), ("NGINX", "nginx")]

pytestmark = pytest.mark.parametrize(("variable", "package"), TOOLS)


def run(
    tmp_path: Path,
    variable: str,
    package: str,
    binary: Path,
    *,
    uid: int,
    given: bool = True,
) -> subprocess.CompletedProcess:
    """Run the script with `binary` as the default path (and in the variable when `given`),
    stand-in `id` and `apt-get` first on PATH (never the real apt-get)."""
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
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    if given:
        env[variable] = str(binary)
    return subprocess.run(
        [SCRIPT, variable, package, str(binary)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def executable(path: Path) -> Path:
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_an_existing_binary_is_printed_and_nothing_installed(tmp_path, variable, package):
    binary = executable(tmp_path / package)
    result = run(tmp_path, variable, package, binary, uid=0)
    assert result.returncode == 0
    assert result.stdout == f"{binary}\n"
    assert not (tmp_path / "apt.log").exists()


def test_without_the_variable_the_program_on_path_is_printed(tmp_path, variable, package):
    on_path = executable(tmp_path / "bin" / package)
    result = run(tmp_path, variable, package, tmp_path / "missing" / package, uid=0, given=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{on_path}\n"
    assert not (tmp_path / "apt.log").exists()


def test_root_with_apt_get_installs_debians_package(tmp_path, variable, package):
    binary = tmp_path / package
    result = run(tmp_path, variable, package, binary, uid=0)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{binary}\n"  # only the path: apt's output went to stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq",
        f"install -y -qq {package}",
    ]


def test_without_root_it_stops_with_one_line_naming_the_command(tmp_path, variable, package):
    binary = tmp_path / package
    result = run(tmp_path, variable, package, binary, uid=1000)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert f"apt-get install -y {package}" in result.stderr
    assert f"set {variable}" in result.stderr
    assert not (tmp_path / "apt.log").exists()
