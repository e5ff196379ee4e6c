"""Markup lives in templates (STYLE.md, "Keeping the house livable"): no module of the apps builds
HTML in Python, with an f-string, ``format_html``, ``%``, ``.format`` or ``+`` on a tag."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("agents", "crews", "planner_site")
TAG = re.compile(r"</?[a-zA-Z][a-zA-Z0-9-]*[\s/>]")
# Issue #13 moves these modules' fragments into templates too (the plan editor's into
# templates/crews/plan_parts.jinja): each leaves this list when it is done.
STILL_CONVERTING: set[str] = set()


def app_modules() -> list[Path]:
    """The apps' modules; not the engines (their tags, like ``<summary>``, are prompts for a model)."""
    return sorted(p for app in APPS for p in (ROOT / app).rglob("*.py")
                  if "migrations" not in p.parts and "engine" not in p.parts)


def text_of(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's literal parts, ``{}`` for each value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def has_tag(node: ast.AST) -> bool:
    text = text_of(node)
    return text is not None and TAG.search(text) is not None


def html_built_in(path: Path) -> list[str]:
    """Where ``path`` writes markup: ``line: how``."""
    where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        how = None
        if isinstance(node, ast.JoinedStr) and has_tag(node):
            how = "f-string"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)) and (
                has_tag(node.left) or has_tag(node.right)):
            how = "% or + on a tag"
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name == "format" and isinstance(func, ast.Attribute) and has_tag(func.value):
                how = ".format on a tag"
            elif name == "format_html_join":
                how = "format_html_join"
            elif name == "format_html" and node.args:
                text = text_of(node.args[0]) or ""
                if len(re.findall(r"<[a-zA-Z]", text)) > 1:  # one element (a link) is fine
                    how = "format_html of several elements"
        if how:
            found.append(f"{where}:{node.lineno}: {how}")  # type: ignore[attr-defined]
    return found


def test_no_module_builds_html() -> None:
    modules = app_modules()
    assert len(modules) > 50 and ROOT / "crews" / "run_view" / "state.py" in modules  # the scan itself works
    found = [where for path in modules if path.relative_to(ROOT).as_posix() not in STILL_CONVERTING
             for where in html_built_in(path)]
    assert not found, "markup belongs in a template (a Jinja2 macro when it is hot): " + "; ".join(found)


def test_modules_still_being_converted_are_listed_only_while_they_build_html() -> None:
    done = [name for name in STILL_CONVERTING if not (ROOT / name).exists() or not html_built_in(ROOT / name)]
    assert not done, f"{done} build no HTML any more: take them off STILL_CONVERTING"


def test_the_scan_finds_each_way_of_building_html(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from django.utils.html import format_html\n"
        "a = f'<li>{x}</li>'\n"
        "b = '<p>%s</p>' % x\n"
        "c = '<b>' + x\n"
        "d = '<i>{}</i>'.format(x)\n"
        "e = format_html('<p><b>{}</b></p>', x)\n"
        "ok = format_html('<a href=\"{}\">{}</a>', url, x)\n"
        "fine = f'{a} < {b}' + 'x > y'\n"
    )
    found = html_built_in(sample)
    assert [line.split(": ", 1)[1] for line in found] == [
        "f-string", "% or + on a tag", "% or + on a tag", ".format on a tag", "format_html of several elements"]
