"""Test settings: a file SQLite database (the live server needs one), fast hashing, quiet logs."""

import os
import tempfile

# Each test process gets its own folder (and SQLite test database): parallel runs never collide.
os.environ.setdefault("PLANNER_VAR_DIR", tempfile.mkdtemp(prefix="crew-planner-test-"))

from planner_site.settings import *  # noqa: E402,F403
from planner_site.settings import DATABASES, VAR_DIR  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if "sqlite" in DATABASES["default"]["ENGINE"]:
    # ChannelsLiveServerTestCase refuses an in-memory database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": ["default"]}}
PLANNER_SECRETS_KEYS = ["Q2xKf0yM2j8a0mQ0n0bq0sS1h6r4A3Wl5mGm6cS3D8E="]
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}

# The demo model answers at once in tests (a paced demo is the default for people).
PLANNER_DEMO_FIRST_TOKEN_SECONDS = 0.0
PLANNER_DEMO_TOKENS_PER_SECOND = 0.0
