"""Prompt titles through the API are in the request's language, as the pages show them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from planner_site.tokens import token_create

ENGLISH, PORTUGUESE = "Crew planner", "Planejador da equipe"


def token_client(user: Any, **headers: str) -> Client:
    _token, raw = token_create(user=user)
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {raw}", **headers)


def titles(response: Any) -> dict[str, str]:
    assert response.status_code == 200, response.content
    return {item["key"]: item["title"] for item in response.json()["items"]}


@pytest.mark.parametrize(
    ("headers", "title"),
    [
        ({"HTTP_ACCEPT_LANGUAGE": "pt-BR"}, PORTUGUESE),
        ({"HTTP_ACCEPT_LANGUAGE": "pt-BR,pt;q=0.9,en;q=0.5"}, PORTUGUESE),
        ({"HTTP_ACCEPT_LANGUAGE": "en-US"}, ENGLISH),
        ({}, ENGLISH),
    ],
)
def test_the_prompt_list_and_a_prompt_have_the_title_in_the_requests_language(builder, headers, title):
    http = token_client(builder, **headers)

    assert titles(http.get("/api/prompts?limit=500"))["crew_plan"] == title
    assert http.get("/api/prompts/crew_plan").json()["title"] == title


def test_the_language_chosen_on_the_pages_wins_over_the_browsers(builder):
    """The pages' language switch sets a cookie; LocaleMiddleware reads it before Accept-Language."""
    http = token_client(builder, HTTP_ACCEPT_LANGUAGE="en")
    http.cookies[settings.LANGUAGE_COOKIE_NAME] = "pt-br"

    assert http.get("/api/prompts/crew_plan").json()["title"] == PORTUGUESE


def test_saving_and_restoring_a_prompt_answer_with_the_translated_title(admin_user):
    http = token_client(admin_user, HTTP_ACCEPT_LANGUAGE="pt-BR")

    def send(method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body) if body is not None else ""
        response = getattr(http, method)(path, data=data, content_type="application/json")
        assert response.status_code == 200, response.content
        return response.json()

    saved = send("put", "/api/prompts/crew_plan", {"text": "Plan it."})
    restored = send("post", "/api/prompts/crew_plan/versions/1/restore")

    assert (saved["title"], restored["title"]) == (PORTUGUESE, PORTUGUESE)
    assert (saved["version"], restored["version"]) == (2, 3)
