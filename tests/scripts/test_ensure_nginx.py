"""scripts/ensure-nginx: find nginx, install Debian's when root can, else one clear line."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-nginx"


def run(tmp_path: Path, nginx: Path, *, uid: int) -> subprocess.CompletedProcess:
    """Run the script with stand-in `id` and `apt-get` first on PATH (never the real apt-get)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stubs = {
        "id": f"echo {uid}",
        # A successful install puts the binary where Debian's package would.
        "apt-get": f'echo "$@" >> {tmp_path}/apt.log; [ "$1" = install ] && '
        f"printf '#!/bin/sh\\n' > {nginx} && chmod +x {nginx}; exit 0",
    }
    for name, body in stubs.items():
        stub = bin_dir / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NGINX": str(nginx)}
    return subprocess.run([SCRIPT], env=env, capture_output=True, text=True, timeout=30)


def test_an_existing_nginx_is_printed_and_nothing_installed(tmp_path):
    nginx = tmp_path / "nginx"
    nginx.write_text("#!/bin/sh\n")
    nginx.chmod(0o755)
    result = run(tmp_path, nginx, uid=0)
    assert result.returncode == 0
    assert result.stdout == f"{nginx}\n"
    assert not (tmp_path / "apt.log").exists()


def test_root_with_apt_get_installs_debians_nginx(tmp_path):
    nginx = tmp_path / "nginx"
    result = run(tmp_path, nginx, uid=0)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{nginx}\n"  # only the path: apt's output went to stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == [
        "update -qq",
        "install -y -qq nginx",
    ]


def test_without_root_it_stops_with_one_line_naming_the_command(tmp_path):
    nginx = tmp_path / "nginx"
    result = run(tmp_path, nginx, uid=1000)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "apt-get install -y nginx" in result.stderr
    assert not (tmp_path / "apt.log").exists()
