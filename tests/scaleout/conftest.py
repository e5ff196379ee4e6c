"""The scale-out group runs only against PostgreSQL + Redis (DATABASE_URL, REDIS_URL).

Elsewhere it is skipped, saying so; with REQUIRE_SCALEOUT=1 (CI) a missing service fails instead.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    problems = []
    if "postgresql" not in engine:
        problems.append("DATABASE_URL is not PostgreSQL")
    if not os.environ.get("REDIS_URL"):
        problems.append("REDIS_URL is not set")
    if not problems:
        return
    reason = "scale-out group needs PostgreSQL and Redis: " + "; ".join(problems)
    if os.environ.get("REQUIRE_SCALEOUT") == "1":
        raise pytest.UsageError(reason)
    for item in items:
        item.add_marker(pytest.mark.skip(reason=reason))
