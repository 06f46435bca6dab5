"""docs/DEPLOY.md shows the reference deployment's files as they are in deploy/ (which the
rolling-restart test runs), so the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "path", ["deploy/nginx/researchsite.conf", "deploy/systemd/researchsite@.service"]
)
def test_deploy_md_shows_the_file_verbatim(path):
    assert (ROOT / path).read_text() in (ROOT / "docs" / "DEPLOY.md").read_text()


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
