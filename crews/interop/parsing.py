"""Parsing one project file, YAML or JSONC, into plain JSON that keeps the line of each key.

Both parsers are linear in the file's size, and each file is capped (``MAX_FILE_BYTES``): a
256 KB file parses in about a tenth of a second. YAML is read by libyaml where it is installed;
one pass over its events comes first and refuses aliases (``*name``: "billion laughs" grow
exponentially once built), nesting deeper than ``MAX_DEPTH`` (libyaml's composer would overflow
the C stack) and more than ``MAX_NODES`` values, before anything is built. JSONC is JSON with
comments and trailing commas: one tokenizer pass blanks those out (keeping every line where it
was), notes each key's line and any key written twice, and ``json.loads`` reads the rest. Only a
small file that JSON cannot read goes to ``json5`` (single quotes, bare keys), whose parser is
slow and super-linear. Every document then goes through ``crews.interop.plain``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json5
import yaml
from django.utils.translation import gettext as _

from crews.interop.plain import MAX_NODES, Path, dotted, plain_json, too_deep, too_many
from crews.interop.problems import Problem
from planner_site.body_checks import MAX_DEPTH

MAX_FILE_BYTES = 256 * 1024  # one agents.yaml, tasks.yaml or .jsonc file; CrewAI's are a few KB
JSON5_MAX_CHARS = 8_000  # json5 reads 8 KB in about 0.3 s and grows faster than the size

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ten times faster


@dataclass
class Document:
    """One parsed file, with the line where each key or list item was written."""

    file: str
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)

    def line(self, path: Path) -> int | None:
        """The line of ``path``, else of the nearest enclosing key that has one."""
        for end in range(len(path), -1, -1):
            found = self.lines.get(tuple(str(p) if isinstance(p, str) else p for p in path[:end]))
            if found is not None:
                return found
        return None


def _too_big(file: str, text: str, problems: list[Problem]) -> bool:
    if len(text) * 4 > MAX_FILE_BYTES and len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        problems.append(Problem(file, None, "", _(
            "This file is larger than %(size)s; a crew project's files are far smaller."
        ) % {"size": f"{MAX_FILE_BYTES // 1024} KB"}))
        return True
    return False


def _plain(doc: Document, data: Any, problems: list[Problem], before: int) -> Document | None:
    """The document with its data made plain JSON, or None when this file had any problem."""
    doc.data = plain_json(data, file=doc.file, line=doc.line, problems=problems)
    return doc if len(problems) == before else None


# YAML ------------------------------------------------------------------------------------------


@dataclass
class _Level:
    mapping: bool
    key: str | None = None
    index: int = 0
    expect_key: bool = True


def _advance(stack: list[_Level]) -> None:
    """A node inside the top collection is complete."""
    if stack:
        top = stack[-1]
        if top.mapping:
            top.expect_key = not top.expect_key
        else:
            top.index += 1


def _yaml_shape(file: str, text: str, problems: list[Problem]) -> bool:
    """libyaml's events, before any node is built: no alias, no nesting deeper than MAX_DEPTH, at
    most MAX_NODES values. Its parser keeps its own stack, so a deep file cannot overflow here."""
    loader = _Loader(text)
    stack: list[_Level] = []
    nodes = 0

    def refuse(event: yaml.Event, message: str) -> bool:
        path = tuple(level.key or "?" if level.mapping else level.index for level in stack)
        problems.append(Problem(file, event.start_mark.line + 1, dotted(path), message))
        return False

    try:
        while True:
            event = loader.get_event()
            if event is None or isinstance(event, yaml.StreamEndEvent):
                return True
            if isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
                _advance(stack)
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            nodes += 1
            if stack and stack[-1].mapping and stack[-1].expect_key:
                stack[-1].key = event.value if isinstance(event, yaml.ScalarEvent) else "?"
            if isinstance(event, yaml.AliasEvent):
                return refuse(event, _("Aliases (*name) are not read here: write the value out in full."))
            if nodes > MAX_NODES:
                return refuse(event, too_many())
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    return refuse(event, too_deep())
                stack.append(_Level(mapping=isinstance(event, yaml.MappingStartEvent)))
            else:
                _advance(stack)
    finally:
        loader.dispose()


def _unblock(node: yaml.Node) -> None:
    """A block scalar (``|`` or ``>``) ends with a line break that is the file's layout, not the
    text's: it goes. Every other character of every text is kept as written."""
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">") and node.value.endswith("\n"):
        node.value = node.value[:-1]


def _yaml_lines(node: yaml.Node, path: Path, doc: Document, problems: list[Problem]) -> None:
    """Lines of keys and items, keys written twice; block scalars' last line break dropped.
    Recursive: ``_yaml_shape`` has bounded the depth."""
    _unblock(node)
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key_node, value in node.value:
            _unblock(key_node)
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            sub = (*path, key_node.value)
            if key_node.value in keys:
                problems.append(Problem(doc.file, key_node.start_mark.line + 1, dotted(sub),
                                        _("This key is written twice; keep one.")))
            keys.add(key_node.value)
            doc.lines.setdefault(sub, key_node.start_mark.line + 1)
            _yaml_lines(value, sub, doc, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            doc.lines.setdefault((*path, index), item.start_mark.line + 1)
            _yaml_lines(item, (*path, index), doc, problems)


def parse_yaml(file: str, text: str, problems: list[Problem]) -> Document | None:
    """The YAML document in ``text`` (safe types only) as plain JSON, or None with the problems
    naming each line."""
    before = len(problems)
    if _too_big(file, text, problems):
        return None
    doc = Document(file, None)
    data = None
    try:
        if not _yaml_shape(file, text, problems):
            return None
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _yaml_lines(node, (), doc, problems)
                data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or ""
        problems.append(Problem(file, mark.line + 1 if mark else None, "",
                                _("This is not valid YAML: %(reason)s.") % {"reason": reason}))
        return None
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        problems.append(Problem(file, None, "", _("This is not valid YAML: %(reason)s.") % {"reason": exc}))
        return None
    return _plain(doc, data, problems, before)


# JSONC -----------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n\ufeff]+)
  | (?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<string>"[^"\\]*(?:\\.[^"\\]*)*"?|'[^'\\]*(?:\\.[^'\\]*)*'?)
  | (?P<punct>[{}\[\]:,])
  | (?P<bare>[^ \t\r\n\ufeff,:\[\]{}/"']+|/)
""", re.DOTALL | re.VERBOSE)
_NOT_NEWLINE = re.compile(r"[^\n]")


@dataclass
class _Frame:
    array: bool
    path: Path
    key: str | int | None = None
    expect_key: bool = False
    keys: set[str] = field(default_factory=set)


@dataclass
class _Scan:
    text: str = ""  # as JSON: comments and trailing commas blanked, every line kept in place
    lines: dict[Path, int] = field(default_factory=dict)  # of each key and list item
    twice: list[tuple[Path, int]] = field(default_factory=list)  # keys written twice in one object
    overflow: int | None = None  # the line where the file passed MAX_NODES values (scan stopped)


def _key(token: str) -> str:
    if "\\" not in token:
        return token[1:-1] if token[:1] in "\"'" else token
    if token.startswith('"'):
        try:
            return str(json.loads(token))
        except ValueError:
            pass
    return token[1:-1] if token[:1] in "\"'" else token


def _jsonc_scan(text: str) -> _Scan:
    """One pass over JSONC ``text``'s tokens (a regular expression finds each one)."""
    scan = _Scan()
    out: list[str] = []
    stack: list[_Frame] = []
    comma: int | None = None  # where the last comma went in ``out``, until something follows it
    line, values = 1, 0

    def value_path() -> Path:
        if not stack:
            return ()
        top = stack[-1]
        return (*top.path, top.key) if top.key is not None else top.path

    for match in _TOKEN.finditer(text):
        kind, token = match.lastgroup, match[0]
        if kind == "space":
            line += token.count("\n")
            out.append(token.replace("\ufeff", " "))
            continue
        if kind == "comment":
            line += token.count("\n")
            out.append(_NOT_NEWLINE.sub(" ", token))
            continue
        if kind == "punct" and token in "}]":
            if comma is not None:
                out[comma] = " "  # a trailing comma
            if stack:
                stack.pop()
            comma = None
        elif token == ",":
            if stack and stack[-1].array:
                stack[-1].key = int(stack[-1].key or 0) + 1
            elif stack:
                stack[-1].expect_key = True
            comma = len(out)
        elif token == ":":
            comma = None
            if stack:
                stack[-1].expect_key = False
        else:
            comma = None
            values += 1
            if values > MAX_NODES:
                scan.overflow = line
                return scan
            if kind == "punct":  # { or [
                path = value_path()
                scan.lines.setdefault(path, line)
                stack.append(_Frame(array=token == "[", path=path, key=0 if token == "[" else None,
                                    expect_key=token == "{"))
            elif stack and not stack[-1].array and stack[-1].expect_key:
                top = stack[-1]
                top.key = _key(token)
                if top.key in top.keys:
                    scan.twice.append(((*top.path, top.key), line))
                top.keys.add(top.key)
                scan.lines.setdefault((*top.path, top.key), line)
            else:
                scan.lines.setdefault(value_path(), line)
        if kind == "string":
            line += token.count("\n")
        out.append(token)
    scan.text = "".join(out)
    return scan


def parse_jsonc(file: str, text: str, problems: list[Problem]) -> Document | None:
    """JSON with comments and trailing commas as plain JSON, or None with the problems naming
    each line."""
    before = len(problems)
    if _too_big(file, text, problems):
        return None
    scan = _jsonc_scan(text)
    if scan.overflow is not None:
        problems.append(Problem(file, scan.overflow, "", too_many()))
        return None
    try:
        data = json.loads(scan.text)
    except RecursionError:
        problems.append(Problem(file, None, "", too_deep()))
        return None
    except ValueError as exc:
        data = _json5(text) if len(text) <= JSON5_MAX_CHARS else _UNREAD
        if data is _UNREAD:  # json's reason: its line is the file's, as blanking kept every line
            problems.append(Problem(file, getattr(exc, "lineno", None), "", _(
                "This is not valid JSONC: %(reason)s.") % {"reason": getattr(exc, "msg", str(exc))}))
            return None
    problems += [Problem(file, at, dotted(path), _("This key is written twice; keep one.")) for path, at in scan.twice]
    return _plain(Document(file, None, scan.lines), data, problems, before)


_UNREAD = object()


def _json5(text: str) -> Any:
    """JSON5's extras (single quotes, bare keys, hexadecimal), or ``_UNREAD``."""
    try:
        return json5.loads(text)
    except (ValueError, RecursionError):
        return _UNREAD
