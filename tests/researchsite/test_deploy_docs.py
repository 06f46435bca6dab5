"""docs/DEPLOY.md points at the reference deployment's files (deploy/, which the rolling-restart
test runs) and names every operations setting."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_md_links_every_deploy_file_and_nothing_that_is_not_there():
    deploy = (ROOT / "docs" / "DEPLOY.md").read_text()
    linked = set(re.findall(r"\]\(\.\./(deploy/[^)]+)\)", deploy))
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "deploy").rglob("*") if path.is_file()}
    assert linked == files


def test_deploy_md_and_readme_name_every_operations_setting():
    deploy = (ROOT / "docs" / "DEPLOY.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for name in (
        "METRICS_ENABLED",
        "METRICS_ALLOWED_IPS",
        "METRICS_TOKEN",
        "LOG_FORMAT",
        "SHUTDOWN_GRACE_SECONDS",
        "READINESS_TIMEOUT_SECONDS",
        "PROMETHEUS_MULTIPROC_DIR",
    ):
        assert name in readme, name
    for name in ("/healthz", "/readyz", "/metrics", "SHUTDOWN_GRACE_SECONDS", "METRICS_TOKEN"):
        assert name in deploy, name
