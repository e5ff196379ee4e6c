"""The Jinja2 environment for the hot fragments (run steps, LLM calls, plan step cards, version
rows): Django's template language took a third of a long run page's time, so these fragments
are Jinja2 macros that the page and the socket both call. Autoescape is on, and escapes as
Django does; translations go through Django's own gettext, read at call time in the active
language."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.template import engines
from django.templatetags.static import static
from django.urls import reverse
from django.utils.translation import gettext, ngettext, npgettext, pgettext
from jinja2 import Environment, nodes
from jinja2.compiler import CodeGenerator
from markupsafe import _escape_inner  # markupsafe's escape, in C, without its Markup


def escape(value: Any) -> str:
    """What ``{{ value }}`` writes: Django's escaping (``'`` → ``&#x27;``, ``"`` → ``&quot;``,
    where markupsafe writes ``&#39;`` and ``&#34;``), so a page's fragments read the same from
    either engine and the socket's match the page's byte for byte. Markup passes unchanged."""
    if value.__class__ is int:
        return str(value)
    if value.__class__ is not str:
        if hasattr(value, "__html__"):
            return value.__html__()  # type: ignore[no-any-return]
        value = str(value)
    text: str = _escape_inner(value)
    if "&#" in text:  # only a quote makes one (& is &amp;)
        text = text.replace("&#39;", "&#x27;").replace("&#34;", "&quot;")
    return text


class DjangoEscapingCodeGenerator(CodeGenerator):
    """Autoescaped ``{{ }}`` output goes through ``escape`` above, at run time. (Only that output:
    ``|e``, ``~`` and ``Markup %`` still escape the markupsafe way, so templates here use none
    of them on text.)"""

    def _output_child_to_const(self, node: nodes.Expr, frame: Any, finalize: Any) -> str:
        if frame.eval_ctx.autoescape and not isinstance(node, nodes.TemplateData):
            raise nodes.Impossible()  # a constant expression is escaped at run time too
        return super()._output_child_to_const(node, frame, finalize)

    def _output_child_pre(self, node: nodes.Expr, frame: Any, finalize: Any) -> None:
        if frame.eval_ctx.autoescape and not frame.eval_ctx.volatile:
            self.write("environment.escape_output(")
            if finalize.src is not None:
                self.write(finalize.src)
        else:
            super()._output_child_pre(node, frame, finalize)


class DjangoEscapingEnvironment(Environment):
    code_generator_class = DjangoEscapingCodeGenerator
    escape_output = staticmethod(escape)


def environment(**options: Any) -> Environment:
    env = DjangoEscapingEnvironment(
        **{**options, "extensions": [*options.get("extensions", ()), "jinja2.ext.i18n"]}
    )
    env.install_gettext_callables(gettext, ngettext, newstyle=True, pgettext=pgettext, npgettext=npgettext)  # type: ignore[attr-defined]
    env.globals.update(url=lambda name, *args: reverse(name, args=args), static=static)
    return env


@cache
def macros(name: str) -> Any:
    """A Jinja2 template's macros as Python callables (``macros("crews/run_parts.jinja").step``),
    compiled once per process: each returns escaped markup (``Markup``, safe for Django too)."""
    return engines["jinja2"].env.get_template(name).module  # type: ignore[attr-defined]
