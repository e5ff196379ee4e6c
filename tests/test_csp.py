"""Every page meets the Content-Security-Policy (settings.SECURE_CSP): no template holds an inline
script, a style attribute or element, an ``on*`` handler or an ``hx-on`` attribute (htmx needs
eval for those), and the pages as rendered hold none either."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'self'; object-src 'none'"
)

COMMENTS = re.compile(r"\{#.*?#\}|\{% comment %\}.*?\{% endcomment %\}|<!--.*?-->", re.S)
SCRIPT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.S | re.I)
STYLE_ELEMENT = re.compile(r"<style\b", re.I)
TAG = re.compile(r"<[a-zA-Z][^<>]*>", re.S)
STYLE_ATTRIBUTE = re.compile(r"\sstyle\s*=", re.I)
HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)
HX_ON = re.compile(r"\s(?:data-)?hx-on\b", re.I)
# Data, not code: a browser never runs these, and CSP lets them be.
DATA_TYPES = re.compile(r"""\btype\s*=\s*["']?(application/(ld\+)?json|text/template)""", re.I)


def csp_breaches(markup: str) -> list[str]:
    """What in ``markup`` the policy would block: inline scripts, ``<style>``, style attributes,
    ``on*`` handlers, ``hx-on`` attributes (each with its line)."""
    text = COMMENTS.sub(lambda m: "\n" * m.group().count("\n"), markup)
    found: list[str] = []

    def line(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for match in SCRIPT.finditer(text):
        attrs, body = match.group(1), match.group(2)
        if DATA_TYPES.search(attrs):
            continue
        if "src=" not in attrs or body.strip():
            found.append(f"{line(match.start())}: inline <script>")
    found += [f"{line(m.start())}: <style> element" for m in STYLE_ELEMENT.finditer(text)]
    for tag in TAG.finditer(text):
        for what, pattern in (("style attribute", STYLE_ATTRIBUTE), ("on* handler", HANDLER),
                              ("hx-on attribute", HX_ON)):
            if pattern.search(tag.group()):
                found.append(f"{line(tag.start())}: {what} in {tag.group()[:60]!r}")
    return found


def template_files() -> list[Path]:
    return sorted(p for p in TEMPLATES.rglob("*") if p.suffix in (".html", ".jinja", ".txt") and p.is_file())


def test_the_scan_finds_each_breach() -> None:
    sample = """{# <style> in a comment is fine #}
<script src="/static/app.js" defer></script>
<script type="application/json" id="data">{"a": 1}</script>
<script>alert(1)</script>
<script src="/x.js">alert(2)</script>
<style>p { color: red }</style>
<p style="color: red">x</p>
<button onclick="go()">go</button>
<form hx-on::after-request="this.reset()"></form>
<div data-hx-on:click="x()"></div>
<p>Style = fine, and one=two in text, on=off.</p>
"""
    found = csp_breaches(sample)

    assert [f.split(": ", 1)[0] for f in found] == ["4", "5", "6", "7", "8", "9", "10"]
    assert [f.split(": ", 1)[1].split(" in ")[0] for f in found] == [
        "inline <script>", "inline <script>", "<style> element", "style attribute", "on* handler",
        "hx-on attribute", "hx-on attribute"]


def test_no_template_holds_inline_script_style_or_handlers() -> None:
    files = template_files()
    assert any(p.suffix == ".jinja" for p in files) and TEMPLATES / "base.html" in files
    found = [f"{p.relative_to(ROOT)}:{where}" for p in files for where in csp_breaches(p.read_text(encoding="utf-8"))]
    assert not found, "the Content-Security-Policy would block: " + "; ".join(found)


def test_htmx_is_told_not_to_inject_styles_or_evaluate_code() -> None:
    base = (TEMPLATES / "base.html").read_text(encoding="utf-8")
    css = (ROOT / "static" / "app.css").read_text(encoding="utf-8")

    assert """<meta name="htmx-config" content='{"includeIndicatorStyles": false, "allowEval": false}'>""" in base
    assert ".htmx-request .htmx-indicator" in css


def test_the_static_scripts_neither_evaluate_code_nor_write_style_attributes() -> None:
    scripts = sorted((ROOT / "static").glob("*.js"))
    assert scripts
    # element.style (and its cssText) is the CSSOM, which the policy allows; markup with a style
    # attribute (innerHTML, insertAdjacentHTML, setAttribute("style")) it blocks (Chromium 156).
    banned = re.compile(r"\beval\(|new Function\(|setAttribute\(\s*[\"']style|insertAdjacentHTML|innerHTML\s*=")
    found = [f"{p.name}: {m.group()}" for p in scripts for m in banned.finditer(p.read_text(encoding="utf-8"))]
    assert not found


# The pages as rendered -------------------------------------------------------------------------


@pytest.fixture
def pages(builder: Any, demo_crew: Any, monkeypatch: Any) -> dict[str, list[str]]:
    """The main pages' URLs, with a finished run and a drafted plan to show."""
    from crews import plans, runner, runs
    from tests.crews.run_helpers import scripted

    scripted(monkeypatch, default="Final Answer: **done**, with <b>markup</b>")
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    plan = plans.plan_draft(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
    task_ids = list(demo_crew.tasks.values_list("pk", flat=True))
    plans.plan_store_draft(plan_id=plan.pk, steps={str(t): ["Read <b>x</b>", "Write"] for t in task_ids},
                           usage={}, task_ids=task_ids)
    agent = demo_crew.agents.first()
    urls = [
        reverse("crews:crew-list"), reverse("crews:crew-detail", args=[demo_crew.pk]),
        reverse("crews:run-list"), reverse("crews:run-detail", args=[run.pk]),
        reverse("agents:agent-list"), reverse("agents:agent-detail", args=[agent.pk]),
        reverse("agents:llm-list"), reverse("agents:llm-create"),
        reverse("crews:plan-detail", args=[plan.pk]), reverse("crews:crew-runs", args=[demo_crew.pk]),
    ]
    return {"urls": urls}


@pytest.mark.django_db
def test_every_main_page_carries_the_policy_and_meets_it(admin_user, pages) -> None:
    client = Client()
    client.force_login(admin_user)
    login = Client().get(reverse("login"))
    answers = [(reverse("login"), login)] + [(url, client.get(url)) for url in pages["urls"]]

    for url, response in answers:
        assert response.status_code == 200, url
        assert response["Content-Security-Policy"] == POLICY, url
        assert not csp_breaches(response.content.decode()), url
