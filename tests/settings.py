"""Test settings: the site's settings, with TEST_DATABASE_URL and fast hashing."""

import environ

from researchsite.settings import *  # noqa: F403
from researchsite.settings import DATABASES, env, tune_sqlite

if test_url := env.str("TEST_DATABASE_URL", default=""):
    DATABASES["default"] = environ.Env.db_url_config(test_url)
    tune_sqlite(DATABASES["default"])
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
