"""The prompt pages (admins): list by purpose, editor with validation and preview, versions,
diff, restore, reset; runs record the versions they used; builders and viewers get 403."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation

from agents import services
from agents.engine.prompts import DEFAULTS
from agents.models import LLM, PromptTemplateVersion
from agents.prompt_purposes import PURPOSES, TITLES, title_of
from agents.templatetags.prompt_links import prompts_used
from crews import runner, runs
from crews.models import Run
from tests.conftest import signed_in
from tests.crews.run_helpers import make_crew, stop_leftover_runs  # noqa: F401 - a fixture
from tests.fakes.openai_server import FakeLLMServer, Reply

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")


def page(response: Any) -> str:
    return html.unescape(response.content.decode())


def versions(key: str) -> list[int]:
    return list(PromptTemplateVersion.objects.filter(template__key=key).order_by("number").values_list("number", flat=True))


def save(admin: Any, key: str, text: str, **extra: str) -> Any:
    return signed_in(admin).post(reverse("agents:prompt-update", args=[key]), {"text": text, "save": "1", **extra})


def all_prompt_pages(key: str = "crew_plan") -> list[tuple[str, str]]:
    return [
        ("get", reverse("agents:prompt-list")),
        ("get", reverse("agents:prompt-update", args=[key])),
        ("post", reverse("agents:prompt-update", args=[key])),
        ("get", reverse("agents:prompt-versions", args=[key])),
        ("get", reverse("agents:prompt-version", args=[key, 1])),
        ("post", reverse("agents:prompt-restore", args=[key, 1])),
        ("post", reverse("agents:prompt-reset", args=[key])),
    ]


# Who may -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "url"), all_prompt_pages())
def test_a_builder_gets_403_on_every_prompt_page(builder, method, url):
    response = getattr(signed_in(builder), method)(url, {"text": "x"} if method == "post" else None)

    assert response.status_code == 403
    assert versions("crew_plan") == [1]


@pytest.mark.parametrize(("method", "url"), all_prompt_pages())
def test_a_viewer_gets_403_on_every_prompt_page(viewer, method, url):
    assert getattr(signed_in(viewer), method)(url).status_code == 403


def test_only_admins_see_the_prompts_link_next_to_llms(admin_user, builder):
    url = reverse("agents:prompt-list")

    assert f'href="{url}"' in page(signed_in(admin_user).get(reverse("agents:llm-list")))
    assert f'href="{url}"' not in page(signed_in(builder).get(reverse("agents:agent-list")))


# The list ----------------------------------------------------------------------------------------


def test_the_list_shows_every_prompt_by_purpose_with_when_it_is_sent(admin_user):
    text = page(signed_in(admin_user).get(reverse("agents:prompt-list")))

    for key, definition in DEFAULTS.items():
        assert reverse("agents:prompt-update", args=[key]) in text, key
        assert definition.title in text
    assert str(PURPOSES["crew_plan"][1]) in text
    assert "Crew planner" in text and "Tool results" in text


def test_every_prompt_the_engine_sends_has_a_sentence_on_when_it_is_sent():
    assert set(DEFAULTS) <= set(PURPOSES), sorted(set(DEFAULTS) - set(PURPOSES))


def test_every_prompt_has_a_translatable_title_that_reads_as_its_seed_in_english():
    with translation.override("en"):
        assert {key: str(TITLES.get(key)) for key in DEFAULTS} == {key: d.title for key, d in DEFAULTS.items()}


def test_titles_show_in_portuguese_wherever_a_prompt_is_named(admin_user):
    services.prompt_update(actor=admin_user, key="crew_plan", text="Edited {tasks}")
    client = signed_in(admin_user)
    portuguese = {"HTTP_ACCEPT_LANGUAGE": "pt-BR"}
    pages = {
        "list": client.get(reverse("agents:prompt-list"), **portuguese),
        "editor": client.get(reverse("agents:prompt-update", args=["crew_plan"]), **portuguese),
        "versions": client.get(reverse("agents:prompt-versions", args=["crew_plan"]), **portuguese),
        "version": client.get(reverse("agents:prompt-version", args=["crew_plan", 1]), **portuguese),
        "admin": client.get(reverse("admin:agents_prompttemplate_changelist"), **portuguese),
    }

    texts = {name: page(response) for name, response in pages.items()}
    url = reverse("agents:prompt-update", args=["crew_plan"])
    assert f'<a href="{url}">Planejador da equipe</a>' in texts["list"]
    assert "<h1>Planejador da equipe</h1>" in texts["editor"]
    assert "Versões de Planejador da equipe" in texts["versions"]
    assert "Planejador da equipe" in texts["version"] and "Planejador da equipe" in texts["admin"]
    assert all("Crew planner<" not in text for text in texts.values()), [n for n, t in texts.items() if "Crew planner<" in t]
    with translation.override("pt-br"):  # the run page's "Prompts used"
        assert [p["title"] for p in prompts_used({"prompts": {"crew_plan": 2}})] == ["Planejador da equipe"]


def test_a_key_without_a_translated_title_keeps_its_stored_one():
    with translation.override("pt-br"):
        assert title_of("a_prompt_from_the_future", "A prompt from the future") == "A prompt from the future"
        assert title_of("crew_plan", "Anything stored") == "Planejador da equipe"


def test_the_admin_shows_a_prompts_title_read_only_as_no_page_shows_an_edited_one(admin_user):
    template = services.prompt_update(actor=admin_user, key="crew_plan", text="Edited {tasks}").template
    client = signed_in(admin_user)
    url = reverse("admin:agents_prompttemplate_change", args=[template.pk])

    text = page(client.get(url))

    # display_title shows the engine's translated title for every seeded key, never the stored one
    assert 'name="title"' not in text and "Crew planner" in text


# The editor --------------------------------------------------------------------------------------


def test_the_editor_shows_the_current_text_its_placeholders_and_a_preview(admin_user):
    text = page(signed_in(admin_user).get(reverse("agents:prompt-update", args=["crew_plan"])))

    assert DEFAULTS["crew_plan"].text.splitlines()[0] in text
    assert 'data-insert-placeholder="{tasks}"' in text
    assert "Task 1: Research tides (Researcher)" in text  # the sample task in the preview
    assert "{tasks}" not in text.split('class="prompt"')[1].split("</pre>")[0]


def test_an_edit_with_an_unknown_placeholder_is_refused_naming_it_and_keeping_the_text(admin_user):
    typed = "Plan these:\n{tasks}\nand also {nope}"

    response = save(admin_user, "crew_plan", typed)

    assert response.status_code == 200
    text = page(response)
    assert "{nope} is not a placeholder of this prompt. It offers: {tasks}." in text
    assert typed in text  # the textarea keeps what was typed
    assert 'aria-invalid="true"' in text
    assert versions("crew_plan") == [1]


def test_an_edit_with_an_unbalanced_brace_is_refused(admin_user):
    response = save(admin_user, "crew_plan", "Plan {tasks} {")

    assert "The brace at character 14 has no partner" in page(response)
    assert versions("crew_plan") == [1]


def test_the_api_refuses_the_same_edit_with_422(admin_user):
    from ninja.testing import TestClient

    from planner_site.api import api

    response = TestClient(api).put("/prompts/crew_plan", json={"text": "x {nope}"}, user=admin_user)

    assert response.status_code == 422 and "nope" in response.content.decode()


def test_preview_renders_the_typed_text_with_the_sample_task_and_saves_nothing(admin_user):
    response = signed_in(admin_user).post(
        reverse("agents:prompt-update", args=["crew_plan"]), {"text": "PREVIEWED {tasks}", "preview": "1"})

    assert "PREVIEWED Task 1: Research tides (Researcher)" in page(response)
    assert versions("crew_plan") == [1]


def test_a_valid_edit_is_a_new_version_with_its_note(admin_user):
    response = save(admin_user, "crew_plan", "Plan carefully:\n{tasks}", note="Shorter wording")

    assert response.status_code == 302
    assert response["Location"] == reverse("agents:prompt-versions", args=["crew_plan"])
    assert versions("crew_plan") == [1, 2]
    text = page(signed_in(admin_user).get(response["Location"]))
    assert "Shorter wording" in text and admin_user.get_username() in text
    assert "Version 2" in text and "Version 1" in text


# Versions, diff, restore, reset ------------------------------------------------------------------


def test_the_diff_between_two_versions_marks_added_and_removed_lines(admin_user):
    services.prompt_update(actor=admin_user, key="crew_plan", text="Line one\nLine two\n{tasks}")
    services.prompt_update(actor=admin_user, key="crew_plan", text="Line one\nLine 2\n{tasks}")

    text = page(signed_in(admin_user).get(reverse("agents:prompt-versions", args=["crew_plan"]), {"a": 2, "b": 3}))

    assert "<del>Line two</del>" in text and "<ins>Line 2</ins>" in text
    assert re.search(r"prompt-diff__line--same[^>]*>\s*<span[^>]*> </span><span>Line one</span>", text)


def test_restoring_a_version_saves_its_text_as_a_new_version(admin_user):
    services.prompt_update(actor=admin_user, key="crew_plan", text="Edited {tasks}")

    response = signed_in(admin_user).post(reverse("agents:prompt-restore", args=["crew_plan", 1]))

    assert response.status_code == 302
    assert versions("crew_plan") == [1, 2, 3]
    assert PromptTemplateVersion.objects.get(template__key="crew_plan", number=3).text == DEFAULTS["crew_plan"].text
    assert "Restored from version 1." in page(signed_in(admin_user).get(response["Location"]))


def test_resetting_to_the_default_saves_it_as_a_new_version(admin_user):
    services.prompt_update(actor=admin_user, key="observe", text="Judge {step}")

    response = signed_in(admin_user).post(reverse("agents:prompt-reset", args=["observe"]))

    assert response.status_code == 302
    newest = PromptTemplateVersion.objects.filter(template__key="observe").order_by("-number").first()
    assert newest.text == DEFAULTS["observe"].text and newest.created_by == admin_user
    assert "Reset to the default text." in page(signed_in(admin_user).get(response["Location"]))


def test_a_version_has_its_own_page(admin_user):
    services.prompt_update(actor=admin_user, key="crew_plan", text="Edited {tasks}")

    text = page(signed_in(admin_user).get(reverse("agents:prompt-version", args=["crew_plan", 1])))

    assert DEFAULTS["crew_plan"].text.splitlines()[0] in text
    assert reverse("agents:prompt-restore", args=["crew_plan", 1]) in text
    assert signed_in(admin_user).get(reverse("agents:prompt-version", args=["crew_plan", 9])).status_code == 404


def test_the_prompt_pages_have_no_inline_scripts_or_styles(admin_user):
    for method, url in all_prompt_pages()[:5]:
        if method != "get":
            continue
        text = signed_in(admin_user).get(url).content.decode()
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), url
        assert not re.search(r"\sstyle=|\son[a-z]+=", text), url


# Runs use the next version and record it --------------------------------------------------------


def test_a_valid_edit_is_used_by_the_next_run_which_records_the_version(admin_user, builder):
    assert save(admin_user, "react_user", "EDITED-PROMPT-MARK\n{description}\n{expected_output}\n{context}").status_code == 302
    with FakeLLMServer() as server:
        server.default = Reply.text("Final Answer: done")
        llm = LLM(name="Fake", model="openai/test", api_base=server.base_url, supports_tools=True,
                  params={"max_retries": 0})
        llm.set_api_key("sk-test-123456")
        llm.save()
        crew = make_crew(builder, tasks=("Research",), llm=llm)
        run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
        runner.execute(run.pk)
        sent = [m.get("content") for r in server.requests for m in r.messages]

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert any("EDITED-PROMPT-MARK" in str(c) for c in sent)
    assert run.snapshot["prompts"]["react_user"] == 2
    assert run.snapshot["prompts"]["crew_plan"] == 1
    url = reverse("agents:prompt-version", args=["react_user", 2])
    assert f'href="{url}"' in page(signed_in(admin_user).get(reverse("crews:run-detail", args=[run.pk])))
    builder_page = page(signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])))
    assert "Prompts used" in builder_page and f'href="{url}"' not in builder_page
