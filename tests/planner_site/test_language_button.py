"""The language switch's button is always in the page, not in <noscript>: with JavaScript on but a
script that failed to load, the form still has a way to be sent (app.js removes it once it runs)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import signed_in


def language_form(html: str) -> str:
    match = re.search(r'<form class="language-form".*?</form>', html, re.S)
    assert match, "no language form"
    return match.group(0)


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["nobody", "builder"])
def test_the_language_form_always_has_its_button_outside_noscript(who: str, request: pytest.FixtureRequest) -> None:
    client = Client() if who == "nobody" else signed_in(request.getfixturevalue("builder"))
    html = client.get(reverse("login") if who == "nobody" else reverse("crews:crew-list")).content.decode()

    form = language_form(html)
    assert "<noscript" not in form
    button = re.search(r'<button type="submit"[^>]* id="language-submit">([^<]*)</button>', form)
    assert button and button.group(1) == "Change language"


@pytest.mark.django_db
def test_the_button_changes_the_language_as_a_plain_form(builder: Any) -> None:
    client = signed_in(builder)
    crews = reverse("crews:crew-list")
    response = client.post(reverse("set_language"), {"language": "pt-br", "next": crews}, follow=True)
    html = response.content.decode()
    assert '<html lang="pt-br">' in html and 'id="language-submit">Mudar idioma</button>' in html
