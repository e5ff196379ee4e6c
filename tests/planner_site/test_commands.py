"""Management commands: bootstrap, create_api_token, seed, rotate_keys."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import override_settings

from agents.engine.prompts import DEFAULTS
from agents.models import LLM, PromptTemplate, PromptTemplateVersion
from crews.models import Crew, Task
from planner_site.models import ApiToken, hash_token
from planner_site.roles import role_of


def run(*args: Any, **kwargs: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, **kwargs)
    return out.getvalue()


@pytest.mark.django_db
def test_bootstrap_creates_then_updates_the_same_user() -> None:
    assert "Created admin ann" in run("bootstrap", username="ann", password="correct horse battery", admin=True)
    assert "Updated builder ann" in run("bootstrap", username="ann", password="another good pass", role="builder")
    users = get_user_model().objects.filter(username="ann")
    assert users.count() == 1
    user = users.get()
    assert user.check_password("another good pass")
    assert role_of(user) == "builder" and not user.is_staff


@pytest.mark.django_db
def test_bootstrap_refuses_a_weak_password_with_the_reason() -> None:
    with pytest.raises(CommandError, match="too short|too common"):
        run("bootstrap", username="ann", password="123")
    assert not get_user_model().objects.filter(username="ann").exists()


@pytest.mark.django_db
def test_create_api_token_prints_it_once_and_stores_only_its_hash() -> None:
    run("bootstrap", username="tim", password="correct horse battery")
    raw = run("create_api_token", "tim").strip()
    token = ApiToken.objects.get()
    assert raw.startswith("cp_") and len(raw) > 30
    assert token.token_hash == hash_token(raw) and raw not in (token.token_hash, token.prefix)


@pytest.mark.django_db
def test_create_api_token_for_an_unknown_user_says_so() -> None:
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        run("create_api_token", "nobody")


@pytest.mark.django_db
def test_seed_is_idempotent_and_makes_the_demo_model_the_default(tmp_path: Any, settings: Any) -> None:
    settings.VAR_DIR = tmp_path
    first = run("seed")
    run("seed")
    assert "username: admin" in first
    assert LLM.objects.get(is_default=True).model == "demo/offline"
    assert LLM.objects.count() == 1
    assert PromptTemplate.objects.count() == len(DEFAULTS)
    assert PromptTemplateVersion.objects.count() == len(DEFAULTS)
    crew = Crew.objects.get(name="AI LLMs")
    assert crew.planning and crew.default_inputs == {"topic": "AI LLMs", "current_year": "2026"}
    assert [t.name for t in Task.objects.filter(crew=crew)] == ["Research", "Report"]
    assert crew.agents.count() == 2
    assert get_user_model().objects.count() == 1
    trip = crew.owner.agents.get(name="Trip planner")
    assert trip.planning


@pytest.mark.django_db
def test_seed_keeps_an_admin_chosen_default(tmp_path: Any, settings: Any) -> None:
    settings.VAR_DIR = tmp_path
    run("seed")
    real = LLM.objects.create(name="Real", model="openai/gpt-4o-mini")
    LLM.objects.update(is_default=False)
    LLM.objects.filter(pk=real.pk).update(is_default=True)
    run("seed")
    assert LLM.objects.get(is_default=True) == real


@pytest.mark.django_db
def test_rotate_keys_re_encrypts_with_the_newest_key(admin_user: Any, settings: Any) -> None:
    from agents.services import llm_create

    llm_create(actor=admin_user, name="Real", model="openai/gpt-4o-mini", api_key="sk-rotate-me-9876")
    new = Fernet.generate_key().decode()
    with override_settings(PLANNER_SECRETS_KEYS=[new, *settings.PLANNER_SECRETS_KEYS]):
        assert "Re-encrypted 1 key(s)." in run("rotate_keys")
        token = LLM.objects.get(name="Real").api_key_encrypted
        assert Fernet(new.encode()).decrypt(token.encode()) == b"sk-rotate-me-9876"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "--threads must be 1 or more"),
        (["--threads", "2", "--batch"], "--batch and --max-tasks work with one thread only"),
        (["--threads", "2", "--max-tasks", "3"], "--batch and --max-tasks work with one thread only"),
    ],
)
@override_settings(TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}})
def test_db_worker_refuses_thread_counts_it_cannot_honour(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("db_worker", *args)


@pytest.mark.django_db
def test_enqueuing_notifies_and_workers_listen_on_postgresql_only(django_assert_num_queries: Any) -> None:
    from django.db import connection
    from django_tasks_db.backend import DatabaseBackend

    from planner_site.notify import Listener, _on_task_enqueued

    postgres = connection.vendor == "postgresql"
    listener = Listener(lambda: None)
    try:
        assert listener.start() is postgres
    finally:
        listener.stop()
    with django_assert_num_queries(1 if postgres else 0) as captured:
        _on_task_enqueued(DatabaseBackend)
    assert [q["sql"] for q in captured.captured_queries] == (["NOTIFY planner_tasks"] if postgres else [])


class _FailingWorker:
    def run(self) -> None:
        raise RuntimeError("the database went away")

    def stop(self) -> None:
        return None


class _BusyWorker:
    """Runs until stopped, going back to the loop the way a run's coroutines do."""

    def __init__(self) -> None:
        self.running = True

    def run(self) -> None:
        from asgiref.sync import async_to_sync

        while self.running:
            async_to_sync(asyncio.sleep)(0.01)

    def stop(self) -> None:
        self.running = False


def test_a_failing_worker_thread_stops_the_others_and_the_process_ends_with_its_error() -> None:
    from planner_site.management.commands.db_worker import Command

    busy = _BusyWorker()
    with pytest.raises(RuntimeError, match="went away"):
        # Without the fix the loop blocked on the pool forever: the timeout would fire instead.
        asyncio.run(asyncio.wait_for(Command()._run_threads([_FailingWorker(), busy]), timeout=20))
    assert busy.running is False
