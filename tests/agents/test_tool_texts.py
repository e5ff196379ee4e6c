"""The catalogue tools' descriptions as people read them: translated on the agent pages, the
engine's English for the model (agents/tool_texts.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation
from django.utils.html import escape

from agents import selectors, services
from agents.forms import AgentForm
from agents.tool_texts import DESCRIPTIONS
from agents.tools import catalogue, registry
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db


def in_language(user: Any, language: str) -> Client:
    client = signed_in(user)
    client.post(reverse("set_language"), {"language": language, "next": "/"})
    return client


def portuguese(name: str) -> str:
    with translation.override("pt-br"):
        return str(DESCRIPTIONS[name])


def test_every_catalogue_tool_has_a_description_for_people_that_matches_the_engine() -> None:
    # A new tool, or an engine description reworded, must come here (and into the .po) too.
    for tool in catalogue():
        name = tool["name"]
        assert name in DESCRIPTIONS, f"add {name!r} to agents.tool_texts.DESCRIPTIONS"
        with translation.override("en"):
            assert str(DESCRIPTIONS[name]) == tool["description"], f"{name!r}: stale msgid"


def test_the_agent_form_in_portuguese_describes_every_tool_in_portuguese(builder: Any) -> None:
    page = in_language(builder, "pt-br").get(reverse("agents:agent-create")).content.decode()
    assert 'lang="pt-br"' in page
    for tool in catalogue():
        translated = portuguese(tool["name"])
        assert translated != tool["description"], f"{tool['name']!r} has no pt-BR translation"
        assert escape(translated) in page
        assert escape(tool["description"]) not in page


def test_the_agent_form_in_english_shows_the_engine_descriptions(builder: Any) -> None:
    page = in_language(builder, "en").get(reverse("agents:agent-create")).content.decode()
    for tool in catalogue():
        assert escape(tool["description"]) in page
        assert escape(portuguese(tool["name"])) not in page


def test_the_agent_page_in_portuguese_describes_its_tools_in_portuguese(builder: Any) -> None:
    names = [tool["name"] for tool in catalogue()]
    agent = services.agent_create(actor=builder, name="Tooled", role="R", goal="G", tools=names)
    page = in_language(builder, "pt-br").get(reverse("agents:agent-detail", args=[agent.pk]))
    for tool in catalogue():
        assert escape(portuguese(tool["name"])) in page.content.decode()
        assert escape(tool["description"]) not in page.content.decode()


def test_a_tool_without_an_entry_shows_the_engine_description() -> None:
    form = AgentForm(
        llms=selectors.llm_list(),
        tools=[{"name": "future_tool", "description": "Does a new thing.", "args_schema": {}}],
    )
    assert form.tool_rows()[0]["description"] == "Does a new thing."


def test_the_model_still_reads_the_engine_english_in_portuguese() -> None:
    with translation.override("pt-br"):
        prompt = registry().describe()
    for tool in catalogue():
        assert f"- {tool['name']}: {tool['description']}\n" in prompt
        assert portuguese(tool["name"]) not in prompt
