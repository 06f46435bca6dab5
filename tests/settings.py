"""Test settings: the site's settings, with TEST_DATABASE_URL and fast hashing."""

import os

import environ

# One SECRET_KEY on every machine. The site masks its secrets in answers (chats/agent/redaction.py)
# and holds back an answer delta that ends with the start of one until the next event, so a key
# drawn at random per checkout would change what pages are sent from clone to clone.
os.environ["SECRET_KEY"] = "~tests-only-secret-key-3"

from researchsite.settings import *  # noqa: F403
from researchsite.settings import DATABASES, env, tune_sqlite

if test_url := env.str("TEST_DATABASE_URL", default=""):
    DATABASES["default"] = environ.Env.db_url_config(test_url)
    tune_sqlite(DATABASES["default"])
# Tests open and close connections from many event loops and threads; keep none between calls.
DATABASES["default"]["CONN_MAX_AGE"] = 0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Browser tests serve the site from a thread: a file database lets it and the test share data
# without SQLite's shared-cache table locks.
LOCAL_DIR.mkdir(exist_ok=True)  # noqa: F405
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(LOCAL_DIR / "test-db.sqlite3")}  # noqa: F405
DEMO_AGENT_PACE = 0.15
# Cited pages are fetched only by the tests about it (they serve the pages themselves).
SOURCE_FETCH_ENABLED = False
