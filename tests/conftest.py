"""Shared fixtures: users in each role, signed-in clients, the seeded demo model and prompts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from planner_site.roles import ADMIN, BUILDER, VIEWER


def make_user(username: str, role: str) -> Any:
    from planner_site.accounts import user_bootstrap

    user, _created = user_bootstrap(username=username, password="pw-" + username, role=role)
    return user


@pytest.fixture(autouse=True)
def process_not_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a process nobody asked to stop (``run_stop_hooks`` says it is)."""
    from planner_site import worker

    monkeypatch.setattr(worker, "_stopping", threading.Event())


@pytest.fixture(autouse=True)
def default_language() -> Iterator[None]:
    """Each test starts in the site's language: a request in pt-BR leaves its language active in
    the thread (LocaleMiddleware activates, nothing deactivates), and text rendered outside a
    request in a later test would come out in Portuguese."""
    from django.utils import translation

    yield
    translation.deactivate()


@pytest.fixture
def seeded(db: Any) -> None:
    """Roles, the offline demo model (site default) and every prompt template."""
    from agents.services import llm_ensure_demo, prompt_seed
    from planner_site.accounts import roles_ensure

    roles_ensure()
    llm_ensure_demo()
    prompt_seed()


@pytest.fixture
def admin_user(seeded: None) -> Any:
    return make_user("ada", ADMIN)


@pytest.fixture
def builder(seeded: None) -> Any:
    return make_user("bob", BUILDER)


@pytest.fixture
def other_builder(seeded: None) -> Any:
    return make_user("olga", BUILDER)


@pytest.fixture
def viewer(seeded: None) -> Any:
    return make_user("vera", VIEWER)


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def builder_client(builder: Any) -> Client:
    return signed_in(builder)


@pytest.fixture
def admin_client_(admin_user: Any) -> Client:
    return signed_in(admin_user)


@pytest.fixture
def demo_crew(builder: Any) -> Any:
    """CrewAI's "AI LLMs" demo crew, owned by ``builder``."""
    from crews.demo import demo_seed

    return demo_seed(owner=builder)
