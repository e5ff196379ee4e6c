"""The tool catalogue: tool definitions, argument validation, and the built-in tools.

Reading a model's tool name and arguments is ``tool_input`` (its names are importable from here
too).
"""

from __future__ import annotations

import ast
import asyncio
import codecs
import functools
import importlib
import inspect
import json
import math
import operator
import re
import ssl
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin, urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agents.engine.tool_input import ToolArgs, ToolInputError, match_tool_name, parse_tool_input

__all__ = [  # what other modules, tests and bench/ import from here
    "HttpGet", "Tool", "ToolArgs", "ToolError", "ToolFn", "ToolInputError", "ToolRegistry", "builtin_tools",
    "calculate", "default_registry", "format_number", "match_tool_name", "parse_tool_input", "text_stats",
]

ToolFn = Callable[[ToolArgs], str | Awaitable[str]]


class ToolError(Exception):
    """A tool's own, explained failure; the message is shown to the model as the observation.

    ``retryable`` marks transient failures (network, timeouts) worth another attempt; bad input
    fails the same way every time, so it is not retried.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Tool:
    """One callable tool: ``run(args)`` returns text, sync or async.

    ``blocking`` sync tools run in a worker thread so they cannot stall the event loop;
    ``cacheable`` is off for tools whose answer changes with time for the same arguments.
    """

    name: str
    description: str
    args_schema: dict[str, Any]
    run: ToolFn
    blocking: bool = False
    cacheable: bool = True
    _validator: list[Any] = field(default_factory=list, repr=False, compare=False)

    @property
    def properties(self) -> dict[str, Any]:
        props = self.args_schema.get("properties")
        return props if isinstance(props, dict) else {}

    def validate(self, args: ToolArgs) -> ToolArgs:
        """Keep only the schema's properties and check them; raise ``ToolInputError`` if invalid.

        Unknown keys are dropped rather than refused: models often add stray fields, and the
        schema is what the tool reads.
        """
        props = self.properties
        if props:
            args = {k: v for k, v in args.items() if k in props}
        errors = sorted(self._get_validator().iter_errors(args), key=lambda e: list(e.path))
        if errors:
            parts = []
            for error in errors[:3]:
                where = ".".join(str(p) for p in error.path)
                parts.append(f"{where}: {error.message}" if where else error.message)
            raise ToolInputError("; ".join(parts))
        return args

    def _get_validator(self) -> Any:
        # Built once per tool, on first use: jsonschema is slow to import and to compile (and
        # ships no type stubs, hence the module lookup).
        if not self._validator:
            jsonschema = importlib.import_module("jsonschema")
            registry = importlib.import_module("referencing").Registry()  # never fetch a remote $ref
            self._validator.append(jsonschema.Draft202012Validator(self.args_schema, registry=registry))
        return self._validator[0]

    async def invoke(self, args: ToolArgs) -> str:
        """Run the tool; exceptions propagate (the executor turns them into observations)."""
        if self.blocking:
            result: Any = await asyncio.to_thread(self.run, args)
        else:
            result = self.run(args)
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else str(result)

    def as_catalogue_entry(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "args_schema": self.args_schema}

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args_schema,
            },
        }


class ToolRegistry:
    """The tools an engine run may use: the built-in catalogue unless ``tools`` is given.

    ``http_allowed_hosts`` is the only way ``http_get`` can reach the network: a host name
    (``example.com``) matches exactly, ``*.example.com`` also matches its subdomains.
    """

    def __init__(
        self,
        tools: Iterable[Tool] | None = None,
        *,
        http_allowed_hosts: Iterable[str] = (),
        http_timeout: float = 10.0,
        http_max_bytes: int = 1_000_000,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        if tools is None:
            tools = builtin_tools(
                http_allowed_hosts=http_allowed_hosts,
                http_timeout=http_timeout,
                http_max_bytes=http_max_bytes,
                now=now,
            )
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def with_tools(self, *tools: Tool) -> ToolRegistry:
        """A new registry with these tools added (the hierarchical manager's delegation tools)."""
        return ToolRegistry([*self._tools.values(), *tools])

    def _select(self, names: Iterable[str] | None) -> list[Tool]:
        if names is None:
            return list(self._tools.values())
        return [self._tools[n] for n in names if n in self._tools]

    def describe(self, names: Iterable[str] | None = None) -> str:
        """Tool list for prompts: name, description and the JSON schema of the arguments."""
        lines = []
        for tool in self._select(names):
            schema = json.dumps(tool.args_schema, separators=(", ", ": "))
            lines.append(f"- {tool.name}: {tool.description}\n  Arguments (JSON schema): {schema}")
        return "\n".join(lines) if lines else "(no tools)"

    def openai_schemas(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self._select(names)]

    def catalogue(self) -> list[dict[str, Any]]:
        return [tool.as_catalogue_entry() for tool in self._tools.values()]


@functools.lru_cache(maxsize=1)
def default_registry() -> ToolRegistry:
    """The built-in catalogue with no network access, built once (its validators compile lazily).

    Callers that pass no registry share it; the Django side passes its own, with the allow-list.
    """
    return ToolRegistry()


# --- built-in tools -----------------------------------------------------------------------------


def builtin_tools(
    *,
    http_allowed_hosts: Iterable[str] = (),
    http_timeout: float = 10.0,
    http_max_bytes: int = 1_000_000,
    now: Callable[[], datetime] | None = None,
) -> list[Tool]:
    """The catalogue every install has; ``now`` and the HTTP limits are injectable for tests."""
    return [
        Tool(
            name="calculator",
            description=(
                "Evaluate an arithmetic expression exactly: + - * / // % ** and parentheses, "
                "and the functions " + ", ".join(sorted(_CALC_FUNCTIONS)) + " with constants "
                "pi, e and tau. Use it for any arithmetic instead of computing in your head."
            ),
            args_schema={
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": "The expression, e.g. (1200 * 0.15) + sqrt(16)",
                        "minLength": 1,
                        "maxLength": _CALC_MAX_LENGTH,
                    }
                },
                "required": ["expression"],
            },
            run=_calculator_tool,
        ),
        Tool(
            name="current_datetime",
            description="The current date, time and weekday in a time zone (default UTC).",
            args_schema={
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "description": "An IANA time zone name such as Europe/Lisbon; default UTC.",
                        "maxLength": 64,
                    }
                },
            },
            run=_make_datetime_tool(now),
            cacheable=False,
        ),
        Tool(
            name="text_stats",
            description=(
                "Count the characters, words, sentences, lines and paragraphs of a text and "
                "estimate its reading time."
            ),
            args_schema={
                "type": "object",
                "properties": {
                    "text": {
                        "type": "string",
                        "description": "The text to measure.",
                        "maxLength": 1_000_000,
                    }
                },
                "required": ["text"],
            },
            run=_text_stats_tool,
        ),
        Tool(
            name="http_get",
            description=(
                "Fetch a web page or API response with a read-only HTTP GET and return its "
                "text. Only hosts the administrator allowed can be reached."
            ),
            args_schema={
                "type": "object",
                "properties": {
                    "url": {
                        "type": "string",
                        "description": "An absolute http:// or https:// URL.",
                        "minLength": 1,
                        "maxLength": 2048,
                    }
                },
                "required": ["url"],
            },
            run=HttpGet(
                allowed_hosts=tuple(http_allowed_hosts),
                timeout=http_timeout,
                max_bytes=http_max_bytes,
            ),
        ),
    ]


# calculator

_CALC_MAX_LENGTH = 500
_CALC_MAX_INT_BITS = 4096  # about 1,233 decimal digits: plenty for arithmetic, cheap to compute
_CALC_MAX_EXPONENT = 10_000

_BIN_OPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CALC_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CALC_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


def calculate(expression: str) -> int | float:
    """Evaluate ``expression`` by walking its AST: numbers, operators and a few functions only."""
    if len(expression) > _CALC_MAX_LENGTH:
        raise ToolError(f"the expression is longer than {_CALC_MAX_LENGTH} characters")
    # Typographic operators are common in copied text; Python's parser does not know them.
    cleaned = expression.strip().replace("×", "*").replace("÷", "/").replace("−", "-")
    try:
        tree = ast.parse(cleaned, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ToolError(f"not a valid arithmetic expression: {expression!r}") from exc
    try:
        value: int | float = _eval(tree.body)
        return value
    except ZeroDivisionError as exc:
        raise ToolError("division by zero") from exc
    except OverflowError as exc:
        raise ToolError("the result is too large") from exc
    except (ValueError, TypeError) as exc:
        raise ToolError(f"cannot evaluate: {exc}") from exc
    except RecursionError as exc:
        raise ToolError("the expression is nested too deeply") from exc


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > _CALC_MAX_INT_BITS:
        raise ToolError("the result is too large")
    if isinstance(value, complex):
        raise ToolError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return value


def _eval(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ToolError(f"only numbers are allowed, not {node.value!r}")
        return _check_size(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _eval(node.operand)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        op = _BIN_OPS.get(type(node.op))
        if op is None:
            hint = " (use ** for powers)" if isinstance(node.op, ast.BitXor) else ""
            raise ToolError(f"operator {type(node.op).__name__} is not allowed{hint}")
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if isinstance(right, (int, float)) and abs(right) > _CALC_MAX_EXPONENT:
                raise ToolError("the exponent is too large")
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and right > 0
                # (bits - 1) * exponent is a lower bound of the result's size: refuse before
                # computing a number that would only be thrown away.
                and (left.bit_length() - 1) * right > _CALC_MAX_INT_BITS
            ):
                raise ToolError("the result is too large")
        return _check_size(op(left, right))
    if isinstance(node, ast.Name):
        if node.id in _CALC_CONSTANTS:
            return _CALC_CONSTANTS[node.id]
        raise ToolError(f"unknown name {node.id!r}")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _CALC_FUNCTIONS:
            allowed = ", ".join(sorted(_CALC_FUNCTIONS))
            raise ToolError(f"unknown function; allowed: {allowed}")
        if node.keywords:
            raise ToolError("keyword arguments are not allowed")
        args = [_eval(a) for a in node.args]
        if node.func.id == "round" and len(args) == 2 and abs(args[1]) > 100:
            raise ToolError("round() accepts at most 100 digits")
        return _check_size(_CALC_FUNCTIONS[node.func.id](*args))
    raise ToolError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def format_number(value: int | float) -> str:
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


def _calculator_tool(args: ToolArgs) -> str:
    return format_number(calculate(str(args["expression"])))


# current_datetime


def _make_datetime_tool(now: Callable[[], datetime] | None) -> ToolFn:
    def current_datetime(args: ToolArgs) -> str:
        name = str(args.get("timezone") or "UTC").strip() or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ToolError(
                f"unknown time zone {name!r}; use an IANA name such as UTC or Europe/Lisbon"
            ) from exc
        moment = (now() if now is not None else datetime.now(UTC)).astimezone(zone)
        return f"{moment.isoformat(timespec='seconds')} ({moment:%A}, {name})"

    return current_datetime


# text_stats

_WORD = re.compile(r"\w+(?:['’-]\w+)*")
_SENTENCE_END = re.compile(r"[.!?…]+(?=\s|$)")
_WORDS_PER_MINUTE = 200


def text_stats(text: str) -> dict[str, Any]:
    words = len(_WORD.findall(text))
    stripped = text.strip()
    sentences = len(_SENTENCE_END.findall(stripped))
    if stripped and stripped[-1] not in ".!?…":
        sentences += 1  # a last sentence without final punctuation still counts
    paragraphs = len([p for p in re.split(r"\n\s*\n", stripped) if p.strip()]) if stripped else 0
    minutes = words / _WORDS_PER_MINUTE
    return {
        "characters": len(text),
        "characters_without_spaces": len(re.sub(r"\s", "", text)),
        "words": words,
        "sentences": sentences,
        "lines": len(text.splitlines()),
        "paragraphs": paragraphs,
        "reading_time_minutes": round(minutes, 1),
        "reading_time": _reading_time(minutes),
    }


def _reading_time(minutes: float) -> str:
    if minutes == 0:
        return "0 seconds"
    if minutes < 1:
        return f"{max(1, round(minutes * 60))} seconds"
    return f"about {math.ceil(minutes)} minute{'s' if math.ceil(minutes) != 1 else ''}"


def _text_stats_tool(args: ToolArgs) -> str:
    return json.dumps(text_stats(str(args["text"])))


# http_get

_TEXTUAL = re.compile(
    r"^(text/|application/(json|xml|xhtml\+xml|javascript|[\w.+-]*\+(json|xml))\b)", re.I
)
_MAX_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class HttpGet:
    """A read-only GET that only reaches allow-listed hosts, with time and size limits.

    Redirects are followed by hand so that every hop is checked against the allow-list.
    """

    allowed_hosts: tuple[str, ...] = ()
    timeout: float = 10.0
    max_bytes: int = 1_000_000

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        for entry in self.allowed_hosts:
            entry = entry.strip().lower().rstrip(".")
            if entry.startswith("*."):
                if host == entry[2:] or host.endswith(entry[1:]):
                    return True
            elif host == entry:
                return True
        return False

    def check_url(self, url: str) -> None:
        if not self.allowed_hosts:
            raise ToolError(
                "http_get is disabled: no hosts are allowed. An administrator can allow hosts "
                "in the site settings."
            )
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ToolError("only http:// and https:// URLs can be fetched")
        if parts.username or parts.password:
            raise ToolError("URLs with credentials are not allowed")
        host = parts.hostname or ""
        if not host or not self.host_allowed(host):
            allowed = ", ".join(self.allowed_hosts)
            raise ToolError(f"host {host or '(none)'!r} is not allowed; allowed hosts: {allowed}")

    async def __call__(self, args: ToolArgs) -> str:
        # aiohttp, the direct LLM path's client, is loaded by the warm-up: httpx was imported
        # here on the tool's first use, 47 ms on the event loop every run shares (#20).
        import aiohttp

        url = str(args["url"]).strip()
        try:
            async with aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=_web_tls()), trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(), timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as session:
                for _ in range(_MAX_REDIRECTS + 1):
                    self.check_url(url)
                    async with asyncio.timeout(self.timeout):
                        async with session.get(url, headers=_HTTP_HEADERS, allow_redirects=False) as response:
                            if response.status in _REDIRECTS and "location" in response.headers:
                                url = urljoin(url, response.headers["location"])
                                continue
                            return await self._read(response)
                raise ToolError(f"too many redirects (more than {_MAX_REDIRECTS})")
        except (aiohttp.InvalidURL, ValueError) as exc:  # a URL that cannot be read or sent: not again
            raise ToolError(f"not a URL that can be fetched: {exc}") from exc
        except aiohttp.ClientError as exc:
            raise ToolError(f"request failed: {type(exc).__name__}: {exc}", retryable=True) from exc
        except TimeoutError as exc:
            raise ToolError(f"request timed out after {self.timeout:g}s", retryable=True) from exc

    async def _read(self, response: Any) -> str:
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        if content_type and not _TEXTUAL.match(content_type):
            return f"HTTP {response.status} {content_type}: not a text response, not read."
        body = bytearray()
        truncated = False
        async for chunk in response.content.iter_chunked(65536):
            body.extend(chunk)
            if len(body) > self.max_bytes:
                del body[self.max_bytes :]
                truncated = True
                break
        text = bytes(body).decode(_charset(response.charset), errors="replace")
        note = f"\n[truncated at {self.max_bytes} bytes]" if truncated else ""
        return f"HTTP {response.status} {content_type or 'unknown type'}\n\n{text}{note}"


_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_web_context: ssl.SSLContext | None = None


def _web_tls() -> ssl.SSLContext:
    """Certificates checked against certifi's bundle, always: ``SSL_VERIFY`` and
    ``SSL_CERT_FILE`` are the LLM paths' settings (a local model server's), not the web's."""
    global _web_context
    if _web_context is None:
        import certifi

        _web_context = ssl.create_default_context(cafile=certifi.where())
    return _web_context


def _charset(declared: str | None) -> str:
    """The declared charset if Python knows it, else UTF-8 (as httpx read a body)."""
    if declared:
        try:
            return codecs.lookup(declared).name
        except LookupError:
            pass
    return "utf-8"


_HTTP_HEADERS = {
    "User-Agent": "CrewPlanner/0.1 (+http_get tool)",
    "Accept": "text/*, application/json",
}
