"""Default prompts a release replaced move on to today's text where nobody edited them."""

from __future__ import annotations

import pytest

from agents.engine.prompts import DEFAULTS
from agents.models import PromptTemplate, PromptTemplateVersion
from agents.services import prompt_seed
from tests.agents.retired_prompts import OLD_REACT_SYSTEM_NO_TOOLS

pytestmark = pytest.mark.django_db


def test_seeding_drops_the_answer_format_from_an_unedited_no_tools_system_prompt():
    prompt_seed()  # an install seeded by the release before: its template holds the old text
    template = PromptTemplate.objects.get(key="react_system_no_tools")
    template.versions.all().delete()
    PromptTemplateVersion.objects.create(template=template, number=1, text=OLD_REACT_SYSTEM_NO_TOOLS)

    prompt_seed()

    newest = template.versions.order_by("-number").first()
    assert (newest.number, newest.text) == (2, DEFAULTS["react_system_no_tools"].text)
    assert "Final Answer" not in newest.text
