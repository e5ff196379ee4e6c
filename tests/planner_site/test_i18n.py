"""Translations: the Brazilian Portuguese catalogue is complete and compiled, every string the code
marks for translation is in it, and the language switch changes the pages.

The catalogue is checked without gettext (makemessages and compilemessages need it; the tests do
not): the .po is parsed here, and every entry must come back from the compiled .mo through
Django's gettext.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import translation
from django.utils.translation.template import templatize

ROOT = Path(settings.BASE_DIR)
PO = Path(settings.LOCALE_PATHS[0]) / "pt_BR" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
# Where makemessages looks (see README: the engines' messages and prompts stay English).
SOURCE_DIRS = ("agents", "crews", "planner_site", "templates")
SKIPPED_DIRS = ("agents/engine", "crews/engine", "migrations")
HOW_TO_FIX = (
    "run `make messages` (gettext's makemessages), translate the new entries in the .po, then "
    "`make compile-messages` and commit the .po and the .mo (README: Languages)"
)


# A small .po reader ----------------------------------------------------------------------------


def parse_po(text: str) -> list[dict[str, Any]]:
    """Entries as dicts: msgid, msgstr or msgstr[n], msgctxt, msgid_plural, flags, obsolete."""
    entries: list[dict[str, Any]] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        entry: dict[str, Any] = {"flags": set(), "obsolete": False}
        key = None
        for line in block.splitlines():
            if line.startswith("#~"):
                entry["obsolete"] = True
                continue
            if line.startswith("#,"):
                entry["flags"] |= {f.strip() for f in line[2:].split(",")}
                continue
            if line.startswith("#"):
                continue
            match = re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(".*")$', line)
            if match:
                key = match.group(1)
                entry[key] = ast.literal_eval(match.group(2))
            elif line.startswith('"') and key:
                entry[key] += ast.literal_eval(line)
        if "msgid" in entry or entry["obsolete"]:
            entries.append(entry)
    return entries


def catalogue() -> list[dict[str, Any]]:
    return [e for e in parse_po(PO.read_text(encoding="utf-8")) if e.get("msgid")]


def translations(entry: dict[str, Any]) -> list[str]:
    return [v for k, v in sorted(entry.items()) if k.startswith("msgstr")]


PLACEHOLDER = re.compile(r"%\(\w+\)[-#0 +.\d]*[sdif]|\{\{|\}\}|\{\w*\}")


# The catalogue ---------------------------------------------------------------------------------


def test_the_catalogue_is_complete_with_no_fuzzy_or_empty_entry() -> None:
    assert PO.exists() and MO.exists(), f"{PO} and its .mo are committed"
    entries = parse_po(PO.read_text(encoding="utf-8"))
    header = next(e for e in entries if e.get("msgid") == "")
    assert "Language: pt_BR" in header["msgstr"]
    assert "Plural-Forms: nplurals=2; plural=(n > 1);" in header["msgstr"]
    assert "fuzzy" not in header["flags"]

    messages = catalogue()
    assert len(messages) > 500
    assert not [e for e in entries if e["obsolete"]], "obsolete (#~) entries are removed"
    fuzzy = [e["msgid"] for e in messages if "fuzzy" in e["flags"]]
    assert not fuzzy, f"fuzzy entries: {fuzzy}"
    empty = [e["msgid"] for e in messages if not all(translations(e))]
    assert not empty, f"untranslated entries: {empty}"
    plural = [e["msgid"] for e in messages if "msgid_plural" in e and len(translations(e)) != 2]
    assert not plural, f"plural entries need two forms: {plural}"


def test_translations_keep_every_placeholder() -> None:
    wrong = []
    for entry in catalogue():
        wanted = sorted(PLACEHOLDER.findall(entry["msgid"]))
        for text in translations(entry):
            if sorted(PLACEHOLDER.findall(text)) != wanted:
                wrong.append((entry["msgid"], text))
    assert not wrong


def test_the_compiled_catalogue_matches_the_po() -> None:
    stale = []
    with translation.override("pt-br"):
        for entry in catalogue():
            msgid, context = entry["msgid"], entry.get("msgctxt")
            if "msgid_plural" in entry:
                got = [
                    translation.npgettext(context, msgid, entry["msgid_plural"], n) if context
                    else translation.ngettext(msgid, entry["msgid_plural"], n)
                    for n in (1, 5)
                ]
            else:
                got = [translation.pgettext(context, msgid) if context else translation.gettext(msgid)]
            if got != translations(entry):
                stale.append(msgid)
    assert not stale, f"the .mo is older than the .po for {stale[:10]}: {HOW_TO_FIX}"


# Every marked string is in the catalogue -------------------------------------------------------

_STRING = r"""u?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_TEMPLATE_CALL = re.compile(rf"(?<![\w.])(n?p?gettext|_)\(\s*({_STRING}(?:\s*,\s*{_STRING})*)")
GETTEXT_NAMES = {
    "_": 0, "gettext": 0, "gettext_lazy": 0, "gettext_noop": 0, "ngettext": 0, "ngettext_lazy": 0,
    "pgettext": 1, "pgettext_lazy": 1, "npgettext": 1, "npgettext_lazy": 1,
}


def source_files(suffix: str) -> list[Path]:
    files = []
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob(f"*{suffix}")):
            relative = path.relative_to(ROOT).as_posix()
            if not any(relative.startswith(s) or f"/{s}/" in relative for s in SKIPPED_DIRS):
                files.append(path)
    return files


def marked_in_python(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        position = GETTEXT_NAMES.get(name)
        if position is None or len(node.args) <= position:
            continue
        arg = node.args[position]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value:
            found.add(arg.value)
    return found


def marked_in_template(path: Path) -> set[str]:
    """What makemessages reads: Django turns the template into gettext() calls first."""
    code = templatize(path.read_text(encoding="utf-8"), origin=str(path))
    found = set()
    for match in _TEMPLATE_CALL.finditer(code):
        strings = [ast.literal_eval(s) for s in re.findall(_STRING, match.group(2))]
        found.add(strings[1] if match.group(1).startswith(("pgettext", "npgettext")) else strings[0])
    return found


def marked_in_jinja(source: str) -> set[str]:
    """The ``_()``, ``gettext``, ``ngettext``, ``pgettext`` and ``npgettext`` calls of a Jinja2
    template (the hot fragments' macros), as Jinja's i18n extension finds them."""
    from django.template import engines

    found = set()
    for _line, function, message in engines["jinja2"].env.extract_translations(source):
        strings = message if isinstance(message, tuple) else (message,)
        text = strings[1] if function in ("pgettext", "npgettext") else strings[0]
        if isinstance(text, str) and text:
            found.add(text)
    return found


def test_marked_strings_are_found_in_jinja_macros() -> None:
    source = (
        '{% macro m(n) %}{{ _("One") }} {{ gettext("Two %(x)s", x=n) }} {{ ngettext("%(num)s step", '
        '"%(num)s steps", n) }} {{ pgettext("verb", "Run") }} {{ words["not marked"] }}{% endmacro %}'
    )
    assert marked_in_jinja(source) == {"One", "Two %(x)s", "%(num)s step", "Run"}


def test_every_marked_string_is_in_the_catalogue() -> None:
    known = {e["msgid"] for e in catalogue()}
    marked: dict[str, str] = {}
    for path in source_files(".py"):
        for text in marked_in_python(path):
            marked.setdefault(text, path.relative_to(ROOT).as_posix())
    for path in source_files(".html"):
        for text in marked_in_template(path):
            marked.setdefault(text, path.relative_to(ROOT).as_posix())
    for path in source_files(".jinja"):
        for text in marked_in_jinja(path.read_text(encoding="utf-8")):
            marked.setdefault(text, path.relative_to(ROOT).as_posix())
    assert len(marked) > 500  # the scan itself works
    missing = {text: where for text, where in marked.items() if text not in known}
    assert not missing, (
        f"strings missing from {PO.name}: {missing}; {HOW_TO_FIX}"
    )


# The language switch ---------------------------------------------------------------------------


def switch(client: Client, language: str, next_url: str) -> None:
    response = client.post(reverse("set_language"), {"language": language, "next": next_url})
    assert response.status_code == 302 and response["Location"] == next_url


@pytest.mark.django_db
def test_the_language_switch_turns_the_crew_list_to_portuguese_and_back(builder: Any, demo_crew: Any) -> None:
    client = Client()
    client.force_login(builder)
    crews = reverse("crews:crew-list")

    page = client.get(crews).content.decode()
    assert '<html lang="en">' in page and ">Crews</a>" in page and "Change language" in page

    switch(client, "pt-br", crews)
    page = client.get(crews).content.decode()
    assert '<html lang="pt-br">' in page
    assert ">Equipes</a>" in page and ">Agentes</a>" in page
    assert "Mudar idioma" in page and "Sair" in page and "Sequencial" in page
    assert '<option value="pt-br" lang="pt-br" selected>' in page
    assert "Change language" not in page

    detail = client.get(reverse("crews:crew-detail", args=[demo_crew.pk])).content.decode()
    assert "Executar agora" in detail and "Rascunhar plano" in detail and "Tarefas" in detail

    switch(client, "en", crews)
    page = client.get(crews).content.decode()
    assert '<html lang="en">' in page and ">Crews</a>" in page and "Equipes" not in page


@pytest.mark.django_db
def test_the_sign_in_page_switches_language_without_signing_in() -> None:
    client = Client()
    login = reverse("login")
    assert "Sign in" in client.get(login).content.decode()

    switch(client, "pt-br", login)
    page = client.get(login).content.decode()
    assert '<html lang="pt-br">' in page
    assert "<h1>Entrar</h1>" in page and "Usuário" in page and "Senha" in page
    failed = client.post(login, {"username": "nobody", "password": "wrong"}).content.decode()
    assert "Não foi possível entrar" in failed

    switch(client, "en", login)
    page = client.get(login).content.decode()
    assert '<html lang="en">' in page and "<h1>Sign in</h1>" in page


@pytest.mark.django_db
def test_portuguese_form_errors_and_messages(builder: Any) -> None:
    client = Client()
    client.force_login(builder)
    switch(client, "pt-br", "/")
    page = client.post(reverse("crews:crew-create"), {"name": ""}).content.decode()
    assert "Corrija estes problemas" in page and "Este campo é obrigatório." in page
    response = client.post(reverse("crews:crew-create"), {"name": "Marés", "process": "sequential"}, follow=True)
    assert "Equipe “Marés” criada." in response.content.decode()


@pytest.mark.django_db
def test_the_run_page_in_portuguese_translates_what_the_worker_stored(builder: Any) -> None:
    from crews import runs
    from crews.models import Run
    from crews.runner import gettext_noop
    from tests.crews.run_helpers import make_crew

    message = "The run stopped because of an internal error."
    assert gettext_noop(message) == message  # the worker stores English
    run = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "marés"}, enqueue=False)
    runs.run_claim(run_id=run.pk, worker_id="test")
    runs.run_finish(run_id=run.pk, status=Run.Status.FAILED, error=message)
    assert Run.objects.get(pk=run.pk).error == message

    client = Client()
    client.force_login(builder)
    page = reverse("crews:run-detail", args=[run.pk])
    assert message in client.get(page).content.decode()

    switch(client, "pt-br", page)
    html = client.get(page).content.decode()
    # The notice is translated; the event log stays the raw record of what was stored.
    notice = re.search(r'<div class="notice notice--danger">(.*?)</div>', html, re.S)
    assert notice and "A execução falhou." in notice.group(1)
    assert "A execução parou por causa de um erro interno." in notice.group(1)
    assert "Executar de novo" in html and "Registro de eventos" in html and "US$ 0,0000" in html
    listing = client.get(reverse("crews:run-list")).content.decode()
    assert "<h1>Execuções</h1>" in listing and "Qualquer status" in listing and "Falhou" in listing


@pytest.mark.django_db
def test_a_failed_plan_shows_the_workers_message_in_portuguese(builder: Any) -> None:
    from crews.models import Plan
    from tests.crews.run_helpers import make_crew

    plan = Plan.objects.create(
        crew=make_crew(builder), status=Plan.Status.FAILED, error="Drafting stopped because of an internal error."
    )
    client = Client()
    client.force_login(builder)
    page = reverse("crews:plan-detail", args=[plan.pk])
    assert "Drafting stopped because of an internal error." in client.get(page).content.decode()
    switch(client, "pt-br", page)
    html = client.get(page).content.decode()
    assert "O rascunho do plano falhou" in html and "O rascunho parou por causa de um erro interno." in html
