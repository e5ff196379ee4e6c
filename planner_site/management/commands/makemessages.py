"""Django's makemessages, reading the Jinja2 templates' strings with Jinja's own extractor.

Given ``-e jinja`` (``make messages`` does), stock makemessages reads a ``.jinja`` file as a
Django template, which finds ``{{ _("...") }}`` but not ``gettext()``, ``ngettext()`` or
``pgettext()`` calls. Here a ``.jinja`` file is handed to xgettext as the calls Jinja's i18n
extension finds in it (``Environment.extract_translations``), each on its own line number, so
the .po points at the template's lines.
"""

from __future__ import annotations

from django.core.management.commands import makemessages
from django.template import engines


def jinja_as_python(source: str) -> str:
    """The gettext calls of a Jinja2 template as Python, each call on its line in the template."""
    lines = [""] * (source.count("\n") + 1)
    env = engines["jinja2"].env  # type: ignore[attr-defined]
    for lineno, function, message in env.extract_translations(source):
        strings = message if isinstance(message, tuple) else (message,)
        args = ", ".join(repr(s) for s in strings if isinstance(s, str))
        lines[lineno - 1] += f"{function}({args}); "
    return "\n".join(lines) + "\n"


class BuildFile(makemessages.BuildFile):
    def preprocess(self) -> None:
        if self.domain != "django" or not self.path.endswith(".jinja"):
            super().preprocess()
            return
        with open(self.path, encoding="utf-8") as template:
            source = template.read()
        with open(self.work_path, "w", encoding="utf-8") as work:
            work.write(jinja_as_python(source))


class Command(makemessages.Command):
    build_file_class = BuildFile
