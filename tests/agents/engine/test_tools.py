"""The tool catalogue: safe built-in tools, argument parsing and validation, name matching."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.engine.tools import (
    HttpGet,
    Tool,
    ToolError,
    ToolInputError,
    ToolRegistry,
    calculate,
    format_number,
    match_tool_name,
    parse_tool_input,
    text_stats,
)

FIXED_NOW = datetime(2025, 3, 30, 12, 0, 0, tzinfo=UTC)


async def run_tool(registry: ToolRegistry, name: str, **args: object) -> str:
    tool = registry.get(name)
    assert tool is not None
    return await tool.invoke(tool.validate(dict(args)))


# --- calculator ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("10 / 4", "2.5"),
        ("10 // 4", "2"),
        ("10 % 4", "2"),
        ("2 ** 10", "1024"),
        ("-3 + +5", "2"),
        ("-(2 ** 2)", "-4"),
        ("0.1 + 0.2", "0.3"),
        ("sqrt(16) + abs(-2)", "6"),
        ("max(1, 7, 3) - min(4, 2)", "5"),
        ("round(2 * pi, 2)", "6.28"),
        ("floor(2.7) + ceil(2.1)", "5"),
        ("log(8, 2)", "3"),
        ("1200 × 0.15", "180"),
    ],
)
def test_calculator_evaluates_arithmetic_with_precedence_and_functions(
    expression: str, expected: str
) -> None:
    assert format_number(calculate(expression)) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("2 ^ 3", r"use \*\* for powers"),
        ("__import__('os')", "unknown function"),
        ("open('x')", "unknown function"),
        ("x + 1", "unknown name 'x'"),
        ("(1).__class__", "Attribute is not allowed"),
        ("'a' * 3", "only numbers are allowed"),
        ("True + 1", "only numbers are allowed"),
        ("9 ** 9 ** 9", "too large"),
        ("10 ** 5000", "too large"),
        ("1e308 * 10", "not a finite number"),
        ("sqrt(-1)", "cannot evaluate"),
        ("1 +", "not a valid arithmetic expression"),
        ("1" * 501, "longer than 500 characters"),
        ("[1, 2]", "List is not allowed"),
        ("1 < 2", "Compare is not allowed"),
    ],
)
def test_calculator_refuses_anything_but_bounded_arithmetic(expression: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        calculate(expression)


async def test_calculator_tool_returns_text_and_its_errors_are_not_retryable() -> None:
    registry = ToolRegistry()
    assert await run_tool(registry, "calculator", expression="6 * 7") == "42"
    with pytest.raises(ToolError) as info:
        await run_tool(registry, "calculator", expression="1/0")
    assert info.value.retryable is False


# --- current_datetime and text_stats ------------------------------------------------------------


async def test_current_datetime_defaults_to_utc() -> None:
    registry = ToolRegistry(now=lambda: FIXED_NOW)
    assert await run_tool(registry, "current_datetime") == "2025-03-30T12:00:00+00:00 (Sunday, UTC)"


async def test_current_datetime_converts_to_an_iana_time_zone() -> None:
    registry = ToolRegistry(now=lambda: FIXED_NOW)
    # Lisbon moved to summer time at 01:00 UTC that day.
    output = await run_tool(registry, "current_datetime", timezone="Europe/Lisbon")
    assert output == "2025-03-30T13:00:00+01:00 (Sunday, Europe/Lisbon)"


async def test_current_datetime_names_an_unknown_time_zone() -> None:
    registry = ToolRegistry(now=lambda: FIXED_NOW)
    with pytest.raises(ToolError, match="unknown time zone 'Mars/Olympus'"):
        await run_tool(registry, "current_datetime", timezone="Mars/Olympus")


def test_text_stats_counts_words_sentences_lines_and_reading_time() -> None:
    text = "Lisbon is hilly. Porto is by the river!\nIs Faro sunny?\n\nIt's warm in the south"
    stats = text_stats(text)
    assert stats["characters"] == len(text)
    assert stats["words"] == 16
    assert stats["sentences"] == 4
    assert stats["lines"] == 4
    assert stats["paragraphs"] == 2
    assert stats["reading_time"] == "5 seconds"


def test_text_stats_of_an_empty_text_is_all_zero() -> None:
    stats = text_stats("")
    assert stats["words"] == stats["sentences"] == stats["lines"] == stats["paragraphs"] == 0
    assert stats["reading_time"] == "0 seconds"


def test_text_stats_reading_time_rounds_up_to_whole_minutes() -> None:
    assert text_stats("word " * 450)["reading_time"] == "about 3 minutes"


# --- http_get -----------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path == "/redirect-out":
            self.send_response(302)
            self.send_header("Location", "http://example.com/")
            self.end_headers()
            return
        if self.path == "/redirect-in":
            self.send_response(302)
            self.send_header("Location", "/hello")
            self.end_headers()
            return
        if self.path == "/image":
            body, kind = b"\x89PNG", "image/png"
        elif self.path == "/big":
            body, kind = b"x" * 5000, "text/plain"
        else:
            body, kind = "olá from loopback".encode(), "text/plain; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        return


@pytest.fixture
def local_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_http_get_is_disabled_without_allowed_hosts() -> None:
    with pytest.raises(ToolError, match="no hosts are allowed"):
        await run_tool(ToolRegistry(), "http_get", url="https://example.com/")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://evil.example.org/", "host 'evil.example.org' is not allowed"),
        ("ftp://example.com/file", "only http:// and https://"),
        ("file:///etc/passwd", "only http:// and https://"),
        ("https://user:pw@example.com/", "credentials"),
        ("https://notexample.com/", "is not allowed"),
    ],
)
def test_http_get_refuses_urls_outside_the_allow_list(url: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        HttpGet(allowed_hosts=("example.com", "*.docs.example.com")).check_url(url)


def test_http_get_wildcard_entries_match_subdomains() -> None:
    fetch = HttpGet(allowed_hosts=("*.example.com",))
    assert fetch.host_allowed("api.example.com")
    assert fetch.host_allowed("EXAMPLE.com")
    assert not fetch.host_allowed("example.com.evil.org")


async def test_http_get_reads_text_from_an_allowed_host(local_server: str) -> None:
    registry = ToolRegistry(http_allowed_hosts=["127.0.0.1"])
    output = await run_tool(registry, "http_get", url=f"{local_server}/hello")
    assert output == "HTTP 200 text/plain\n\nolá from loopback"


async def test_http_get_follows_redirects_only_within_the_allow_list(local_server: str) -> None:
    registry = ToolRegistry(http_allowed_hosts=["127.0.0.1"])
    assert "olá" in await run_tool(registry, "http_get", url=f"{local_server}/redirect-in")
    with pytest.raises(ToolError, match="host 'example.com' is not allowed"):
        await run_tool(registry, "http_get", url=f"{local_server}/redirect-out")


async def test_http_get_truncates_large_bodies_and_skips_binary(local_server: str) -> None:
    registry = ToolRegistry(http_allowed_hosts=["127.0.0.1"], http_max_bytes=1000)
    big = await run_tool(registry, "http_get", url=f"{local_server}/big")
    assert big.endswith("x" * 1000 + "\n[truncated at 1000 bytes]")
    image = await run_tool(registry, "http_get", url=f"{local_server}/image")
    assert image == "HTTP 200 image/png: not a text response, not read."


async def test_http_get_connection_errors_are_retryable() -> None:
    # Port 9 (discard) on loopback is closed in the test environment: the connection is refused.
    registry = ToolRegistry(http_allowed_hosts=["127.0.0.1"], http_timeout=2)
    with pytest.raises(ToolError, match="request failed") as info:
        await run_tool(registry, "http_get", url="http://127.0.0.1:9/")
    assert info.value.retryable is True


# --- registry -----------------------------------------------------------------------------------


def test_registry_catalogue_lists_the_built_in_tools_with_their_schemas() -> None:
    catalogue = ToolRegistry().catalogue()
    assert [t["name"] for t in catalogue] == [
        "calculator",
        "current_datetime",
        "text_stats",
        "http_get",
    ]
    for entry in catalogue:
        assert set(entry) == {"name", "description", "args_schema"}
        assert entry["description"]
        assert entry["args_schema"]["type"] == "object"


def test_describe_shows_each_tool_with_its_argument_schema() -> None:
    text = ToolRegistry().describe(["calculator", "missing"])
    assert text.startswith("- calculator: Evaluate an arithmetic expression")
    assert '"required": ["expression"]' in text
    assert "text_stats" not in text


def test_openai_schemas_are_function_tools_in_the_requested_order() -> None:
    schemas = ToolRegistry().openai_schemas(["text_stats", "calculator"])
    assert [s["function"]["name"] for s in schemas] == ["text_stats", "calculator"]
    assert schemas[0]["type"] == "function"
    assert schemas[0]["function"]["parameters"]["required"] == ["text"]


def test_registry_rejects_duplicate_names_and_can_be_extended() -> None:
    extra = Tool(name="echo", description="Echo.", args_schema={"type": "object"}, run=str)
    registry = ToolRegistry().with_tools(extra)
    assert "echo" in registry and "calculator" in registry
    with pytest.raises(ValueError, match="duplicate tool name 'echo'"):
        registry.with_tools(extra)


def test_validate_drops_unknown_keys_and_reports_schema_errors() -> None:
    tool = Tool(
        name="pick",
        description="Pick one.",
        args_schema={
            "type": "object",
            "properties": {
                "colour": {"type": "string", "enum": ["red", "green"]},
                "count": {"type": "integer"},
            },
            "required": ["colour"],
        },
        run=str,
    )
    assert tool.validate({"colour": "red", "mood": "happy"}) == {"colour": "red"}
    with pytest.raises(ToolInputError, match="'colour' is a required property"):
        tool.validate({})
    with pytest.raises(ToolInputError, match="colour: 'blue' is not one of"):
        tool.validate({"colour": "blue"})
    with pytest.raises(ToolInputError, match="count: 'two' is not of type 'integer'"):
        tool.validate({"colour": "red", "count": "two"})


async def test_blocking_sync_tools_run_in_a_worker_thread() -> None:
    main = threading.get_ident()
    tool = Tool(
        name="where",
        description="Thread id.",
        args_schema={"type": "object"},
        run=lambda args: str(threading.get_ident()),
        blocking=True,
    )
    assert await tool.invoke({}) != str(main)


# --- parsing and matching -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"expression": "2+2"}', {"expression": "2+2"}),
        ("{'expression': '2+2'}", {"expression": "2+2"}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ('{"flag": True, "none": None}', {"flag": True, "none": None}),
        ("{'flag': true, 'none': null}", {"flag": True, "none": None}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('I will use: {"a": 1} now', {"a": 1}),
        ('"{\\"a\\": 2}"', {"a": 2}),
        ("", {}),
        ("  ", {}),
        (None, {}),
        ({"already": "parsed"}, {"already": "parsed"}),
    ],
)
def test_parse_tool_input_accepts_json_and_repairs_common_mistakes(
    raw: str | dict[str, object] | None, expected: dict[str, object]
) -> None:
    assert parse_tool_input(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),  # raw newline inside
        ("{'query': 'it is \"quoted\"', 'n': 2}", {"query": 'it is "quoted"', "n": 2}),
        ("{query: lisbon hotels}", {"query": "lisbon hotels"}),  # no quotes at all
        ('{"query": "lisbon", "limit": [1, 2', {"query": "lisbon", "limit": [1, 2]}),  # no brackets
        ('I will search now. {"query": "lisbon hotels"', {"query": "lisbon hotels"}),  # cut off
        ("{broken: [", {"broken": []}),
    ],
)
def test_parse_tool_input_mends_what_weak_models_write_with_json_repair(
    raw: str, expected: dict[str, object]
) -> None:
    assert parse_tool_input(raw) == expected


@pytest.mark.parametrize("raw", ["2 + 2", "[1, 2]", '"just text"', "{", "{:"])
def test_parse_tool_input_refuses_what_is_not_an_object(raw: str) -> None:
    with pytest.raises(ToolInputError):
        parse_tool_input(raw)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("calculator", "calculator"),
        ("Calculator", "calculator"),
        ("**calculator**", "calculator"),
        ("Text Stats", "text_stats"),
        ("text-stats", "text_stats"),
        ("calculater", "calculator"),
        ("search", None),
        ("calc", None),
        ("", None),
    ],
)
def test_tool_names_match_exactly_then_ignoring_case_then_by_similarity(
    name: str, expected: str | None
) -> None:
    assert match_tool_name(name, ["calculator", "text_stats", "http_get"]) == expected


def test_http_get_loads_no_second_http_client() -> None:
    """http_get goes through aiohttp, which the warm-up has loaded for the LLM path: httpx, once
    imported on the tool's first use, cost ~47 ms on the event loop every run shares (#20)."""
    import subprocess
    import sys
    from pathlib import Path

    probe = """
import asyncio, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello"
        self.send_response(200); self.send_header("Content-Type", "text/plain"); self.send_header("Content-Length", "5")
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=server.serve_forever, daemon=True).start()
from agents.engine.tools import HttpGet
out = asyncio.run(HttpGet(allowed_hosts=("127.0.0.1",))({"url": f"http://127.0.0.1:{server.server_address[1]}/"}))
print(out.splitlines()[0], "httpx" in sys.modules)
"""
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["HTTP", "200", "text/plain", "False"], done.stdout + done.stderr


def test_http_get_checks_certificates_against_certifi_whatever_the_llm_tls_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """SSL_VERIFY=false or an internal SSL_CERT_FILE are set for a local model server: the web
    tool still checks every certificate against the public bundle."""
    import ssl

    import certifi

    from agents.engine import tools

    monkeypatch.setenv("SSL_VERIFY", "false")
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/internal-ca.pem")
    monkeypatch.setattr(tools, "_web_context", None)
    context = tools._web_tls()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == ssl.create_default_context(cafile=certifi.where()).cert_store_stats()["x509_ca"]


async def test_http_get_a_url_that_cannot_be_sent_fails_once_not_retried() -> None:
    registry = ToolRegistry(http_allowed_hosts=["127.0.0.1"], http_timeout=2)
    for url in ("http://127.0.0.1:99999/", "http://[::1/"):
        with pytest.raises(ToolError) as info:
            await run_tool(registry, "http_get", url=url)
        assert info.value.retryable is False, (url, str(info.value))
