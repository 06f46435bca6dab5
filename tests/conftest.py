from pathlib import Path

import pytest

FIXTURES_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "streams"


@pytest.fixture
def stream_fixtures_dir() -> Path:
    if not FIXTURES_DIR.is_dir():
        pytest.fail(f"The shared stream captures are missing: {FIXTURES_DIR}")
    return FIXTURES_DIR
