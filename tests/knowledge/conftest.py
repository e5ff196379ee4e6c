"""Shared by the knowledge tests."""

from __future__ import annotations

import pytest
from ninja.testing import TestClient

from knowledge import embeddings
from planner_site.api import api


@pytest.fixture(autouse=True)
def fresh_vector_cache() -> None:
    """Each test starts with no vector kept: SQLite hands out the ids of a rolled-back test's chunks
    again, and the cache (keyed by the chunks' count and highest id) trusts ids never to come back."""
    embeddings.vector_cache.clear()


@pytest.fixture
def client() -> TestClient:
    """The API, called in-process (``client.get(path, user=...)``)."""
    return TestClient(api)
