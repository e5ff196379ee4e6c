"""Migration 0006: an LLM's old ``timeout`` (httpx's, between chunks) becomes its first-token limit,
so a row saved as ``{"timeout": 60}`` no longer cuts a slow model's long answer at 60 s."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
from django.apps import apps
from django.db import connection

from agents.bridge import llm_spec
from agents.models import LLM

pytestmark = pytest.mark.django_db

migration = import_module("agents.migrations.0006_llm_timeout_becomes_first_token_timeout")


def migrate() -> None:
    class Editor:
        pass

    editor: Any = Editor()
    editor.connection = connection
    migration.move_timeout_to_first_token_timeout(apps, editor)


def make(name: str, params: Any) -> LLM:
    return LLM.objects.create(name=name, model="openai/local", params=params)


def test_an_old_timeout_becomes_the_first_token_limit_and_the_whole_call_keeps_its_default() -> None:
    old = make("Old", {"timeout": 60, "temperature": 0.2})
    new = make("New", {"timeout": 900, "first_token_timeout": 300, "connect_timeout": 10})
    plain = make("Plain", {"temperature": 0.5})
    odd = make("Odd", [])  # not an object: left for the form to flag

    migrate()

    for llm in (old, new, plain, odd):
        llm.refresh_from_db()
    assert old.params == {"first_token_timeout": 60, "temperature": 0.2}
    assert (llm_spec(old).first_token_timeout, llm_spec(old).timeout) == (60.0, 600.0)
    assert new.params == {"timeout": 900, "first_token_timeout": 300, "connect_timeout": 10}
    assert plain.params == {"temperature": 0.5}
    assert odd.params == []


def test_running_it_twice_changes_nothing_more() -> None:
    old = make("Old", {"timeout": 60})

    migrate()
    migrate()

    old.refresh_from_db()
    assert old.params == {"first_token_timeout": 60}


def test_it_reverses_as_a_no_op() -> None:
    operation = migration.Migration.operations[0]

    assert operation.reversible and operation.reverse_code is not None
