"""Prompt template pages (admins): the list by purpose, the editor with its placeholders and a
preview, the versions with who/when/note, a diff between any two, restore and reset.

Every save is a new immutable version (``agents.services.prompt_update``); the next run reads it.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents import selectors, services
from agents.engine.prompts import DEFAULTS, PromptError, parse_placeholders, unknown_placeholders
from agents.engine.prompts import render as render_prompt
from agents.prompt_purposes import GROUPS, group_of, purpose_of, sample_values
from agents.views import HtmxHttpRequest, domain_errors, redirect_after_post, require_admin


class PromptForm(forms.Form):
    text = forms.CharField(label=gettext_lazy("Prompt text"), widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}),
                           max_length=20_000, strip=False)
    note = forms.CharField(label=gettext_lazy("Note (optional)"), max_length=500, required=False,
                           help_text=gettext_lazy("Why you changed it: shown in the list of versions."))


def text_problem(key: str, text: str) -> str:
    """What is wrong with ``text`` as the template for ``key``, in the reader's language ("" when
    nothing is): the engine's own checks (``agents.engine.prompts``), worded for the page."""
    if not text.strip():
        return _("The prompt text cannot be empty.")
    try:
        parse_placeholders(text)
    except PromptError as exc:
        where = re.search(r"character (\d+)", str(exc))
        return _("The brace at character %(n)s has no partner. Write {{ or }} for a literal brace.") % {
            "n": where.group(1) if where else "?"}
    offered = DEFAULTS[key].placeholders
    unknown = unknown_placeholders(text, offered)
    if unknown:
        names = ", ".join("{" + name + "}" for name in unknown)
        if not offered:
            return _("This prompt offers no placeholders, but the text uses %(names)s.") % {"names": names}
        return _("%(names)s is not a placeholder of this prompt. It offers: %(offered)s.") % {
            "names": names, "offered": ", ".join("{" + name + "}" for name in offered)}
    return ""


def _preview(key: str, text: str) -> tuple[str, str]:
    """``text`` rendered with the sample task, or ("", the problem) when it cannot be."""
    problem = text_problem(key, text)
    if problem:
        return "", problem
    return render_prompt(text, sample_values(DEFAULTS[key].placeholders)), ""


def _prompt_context(key: str) -> dict[str, Any]:
    template, current = selectors.prompt_get(key=key)
    return {
        "template": template,
        "current": current,
        "purpose": purpose_of(key, template.display_title),
        "group": GROUPS[group_of(key)],
        "placeholders": [{"name": name, "token": "{" + name + "}", "sample": sample}
                         for name, sample in sample_values(DEFAULTS[key].placeholders).items()],
        "is_default": key in DEFAULTS and current.text == DEFAULTS[key].text,
    }


@require_GET
@domain_errors
def prompt_list(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    grouped: dict[str, list[dict[str, Any]]] = {name: [] for name in GROUPS}
    for template, current in selectors.prompt_list():
        grouped[group_of(template.key)].append({
            "template": template,
            "current": current,
            "purpose": purpose_of(template.key, template.display_title),
            "edited": current is not None and template.key in DEFAULTS and current.text != DEFAULTS[template.key].text,
        })
    groups = [{"name": GROUPS[name], "slug": name, "prompts": items} for name, items in grouped.items() if items]
    return render(request, "agents/prompt_list.html", {"groups": groups})


@require_http_methods(["GET", "POST"])
@domain_errors
def prompt_update(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """The editor. "Preview" renders the posted text with the sample task and saves nothing;
    "Save" adds a version, or shows what is wrong beside the text, which is kept as typed."""
    require_admin(request)
    context = _prompt_context(key)
    form = PromptForm(request.POST if request.method == "POST" else None,
                      initial={"text": context["current"].text})
    text = context["current"].text
    if request.method == "POST" and form.is_valid():
        text = form.cleaned_data["text"]
        problem = text_problem(key, text)
        if problem:
            form.add_error("text", problem)
        elif "preview" not in request.POST:
            try:
                version = services.prompt_update(actor=request.user, key=key, text=text,
                                                 note=form.cleaned_data["note"])
            except ValidationError as exc:
                for message in exc.message_dict.get("text", exc.messages):
                    form.add_error("text", message)
            else:
                messages.success(request, _("Saved as version %(n)s. The next run uses it.") % {"n": version.number})
                return redirect_after_post(request, reverse("agents:prompt-versions", args=[key]))
    elif request.method == "POST":
        text = request.POST.get("text", "")
    preview, preview_error = _preview(key, text)
    template = "agents/prompt_form.html"
    if request.htmx and request.method == "POST":
        template += "#prompt-editor"
    return render(request, template, {**context, "form": form, "preview": preview, "preview_error": preview_error,
                                      "previewing": "preview" in request.POST})


@require_GET
@domain_errors
def prompt_versions(request: HtmxHttpRequest, key: str) -> HttpResponse:
    """The versions, newest first, and the diff between two of them (``?a=&b=``, by default
    the one before the newest and the newest)."""
    require_admin(request)
    context = _prompt_context(key)
    history = selectors.prompt_history(key=key)
    numbers = [v.number for v, _said in history]
    a, b = _pair(request.GET, numbers)
    diff = selectors.prompt_diff(key=key, a=a, b=b) if a and b else None
    return render(request, "agents/prompt_versions.html",
                  {**context, "history": history, "numbers": numbers, "a": a, "b": b, "diff": diff})


def _pair(query: Any, numbers: list[int]) -> tuple[int | None, int | None]:
    def pick(name: str, default: int | None) -> int | None:
        raw = query.get(name, "")
        return int(raw) if raw.isdigit() and int(raw) in numbers else default

    newest = numbers[0] if numbers else None
    before = numbers[1] if len(numbers) > 1 else newest
    return pick("a", before), pick("b", newest)


@require_GET
@domain_errors
def prompt_version(request: HtmxHttpRequest, key: str, number: int) -> HttpResponse:
    require_admin(request)
    context = _prompt_context(key)
    version = selectors.prompt_version_get(key=key, number=number)
    return render(request, "agents/prompt_version.html", {**context, "version": version})


@require_POST
@domain_errors
def prompt_restore(request: HtmxHttpRequest, key: str, number: int) -> HttpResponse:
    require_admin(request)
    version = services.prompt_restore(actor=request.user, key=key, number=number)
    messages.success(request, _("Version %(old)s restored as version %(n)s.") % {"old": number, "n": version.number})
    return redirect_after_post(request, reverse("agents:prompt-versions", args=[key]))


@require_POST
@domain_errors
def prompt_reset(request: HtmxHttpRequest, key: str) -> HttpResponse:
    require_admin(request)
    version = services.prompt_reset(actor=request.user, key=key)
    messages.success(request, _("The default text is back, as version %(n)s.") % {"n": version.number})
    return redirect_after_post(request, reverse("agents:prompt-versions", args=[key]))
