"""A fake OpenAI-compatible chat-completions server on 127.0.0.1:0 that tests script and inspect.

Real sockets and real HTTP, so the code under test (litellm, openai, httpx) runs unpatched::

    from tests.fakes.openai_server import FakeLLMServer, Reply

    with FakeLLMServer() as server:
        server.add(
            Reply.error(429, retry_after=0),  # the first request gets this
            Reply.text("Hello there"),  # the second one this
            Reply.tool_call("calculator", {"expression": "12 * 7"}),
        )
        llm = LLMSpec(key="t", model="openai/fake", api_base=server.base_url, api_key="sk-test")
        ...
        assert server.requests[0].authorization == "Bearer sk-test"

Replies (each also takes ``delay=``, ``chunk_delay=``, ``status=``, ``headers=``,
``prompt_tokens=``, ``completion_tokens=``, ``include_usage=``):

- ``Reply.text(content, chunks=[...])`` and ``Reply.json(value)``: an assistant message;
- ``Reply.tool_call(name, args, call_id=, fragments=[...])``, ``Reply.tool_calls(FakeToolCall...)``;
- ``Reply.error(status, message, retry_after=)``, ``Reply.context_length_exceeded()``;
- ``Reply.malformed(body)``: a 200 whose body is not JSON;
- ``Reply.endless(piece)``: a model that keeps generating until its connection closes: streamed,
  ``piece`` every ``chunk_delay`` (50 ms) forever; unstreamed, no answer at all (like
  llama-cpp-python, which cannot abort an unstreamed request). ``server.disconnects`` records
  when it saw a stream's connection closed;
- ``reply.after(seconds)``: the same reply, held back (to trigger a client timeout);
- a stream's wire form: ``write_size=`` (HTTP chunks of that many bytes, cutting lines and
  UTF-8 characters anywhere), ``line_ending="\\r\\n"``, ``ascii_json=False`` (raw UTF-8).

A reply describes one assistant message; whether it goes out as one JSON body or as a
``text/event-stream`` follows the request's ``"stream"`` flag, so one script serves streaming and
non-streaming callers alike (``chunks`` / ``fragments`` split text and tool-call arguments when
streamed; ``chunk_delay`` spaces the events). Usage is always on JSON bodies, and on streams when
the client asks with ``stream_options.include_usage``.

``server.embed`` (a function of one text returning its vector) answers ``/v1/embeddings`` when set
(floats, or base64 float32 as the OpenAI client asks by default); those requests go to
``server.embedding_requests``, not ``server.requests``.

Other paths answer 404 unless ``server.pages`` has a JSON body for them (a local server's
settings: llama.cpp ``/props``, vLLM ``/v1/models``, ...).

Inspecting: ``server.requests`` (``RecordedRequest``: headers, raw bytes, parsed ``body``,
``messages``, ``authorization``), ``server.request_count``, ``server.pending``,
``server.disconnects`` (``time.monotonic()`` of each closed endless stream;
``server.wait_disconnect(timeout)`` waits for the first). A request with no
scripted reply left gets ``server.default`` (a ``Reply``, or a function of the ``RecordedRequest``
returning one); with no default it gets a 400 error (not retryable) and is also kept in
``server.unexpected``.

The pytest fixture ``fake_llm_server`` yields a started server and closes it after the test. Use
it by importing it into a test module
(``from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401``) or by
listing ``"tests.fakes.openai_server"`` in ``pytest_plugins`` of the root ``conftest.py``.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "FakeLLMServer",
    "FakeToolCall",
    "RecordedRequest",
    "Reply",
    "fake_llm_server",
]

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
EMBEDDING_PATHS = ("/v1/embeddings", "/embeddings")


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any  # the parsed JSON body, or None when it was not JSON
    at: float  # time.monotonic() when the request was read
    client_port: int = 0  # the connection's port on the client's side: one per kept-alive connection

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream")) if isinstance(self.body, dict) else False

    @property
    def wants_stream_usage(self) -> bool:
        options = self.body.get("stream_options") if isinstance(self.body, dict) else None
        return bool(isinstance(options, dict) and options.get("include_usage"))

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text_of(message.get("content"))
        return ""


@dataclass(frozen=True, slots=True)
class FakeToolCall:
    """A tool call the fake model makes; ``fragments`` split the arguments when streamed."""

    name: str
    arguments: str
    id: str = "call_1"
    fragments: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build it with the class methods; every field is also a keyword.

    ``delay`` holds the response back before the status line (to trigger client timeouts);
    ``chunk_delay`` spaces out streamed events. ``raw`` replaces the body verbatim.
    """

    content: str | None = None
    chunks: tuple[str, ...] | None = None  # how ``content`` is split when streamed
    calls: tuple[FakeToolCall, ...] = ()  # native tool calls
    finish_reason: str | None = None  # default: "tool_calls" when there are any, else "stop"
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    raw: bytes | None = None
    raw_type: str = "application/json"  # the Content-Type ``raw`` goes out with
    error_body: dict[str, Any] | None = None  # sent as {"error": ...}
    delay: float = 0.0
    chunk_delay: float = 0.0
    prompt_tokens: int | None = None  # default: request characters / 4
    completion_tokens: int | None = None  # default: answer characters / 4
    include_usage: bool | None = None  # None: JSON always, streams when the client asks
    forever: bool = False  # ``Reply.endless``: keep generating ``content`` until the client leaves
    stream_error: dict[str, Any] | None = None  # ``Reply.fails_mid_stream``: sent as a data event
    # How a stream goes over the wire (defaults: one HTTP chunk per event, "\n", ASCII-only JSON):
    write_size: int | None = None  # the whole stream in HTTP chunks of this many bytes, cutting
    # lines and multi-byte characters wherever they fall (``chunk_delay`` then spaces the chunks)
    line_ending: str = "\n"  # "\r\n" or "\r" as some servers send
    ascii_json: bool = True  # False: non-ASCII text as UTF-8 bytes, as vLLM and llama.cpp send it

    @classmethod
    def text(cls, content: str, *, chunks: list[str] | None = None, **kw: Any) -> Reply:
        """A plain assistant message; streamed word by word unless ``chunks`` says otherwise."""
        return cls(content=content, chunks=tuple(chunks) if chunks is not None else None, **kw)

    @classmethod
    def json(cls, value: Any, **kw: Any) -> Reply:
        """A message whose content is ``value`` serialised as JSON (structured answers)."""
        return cls.text(json.dumps(value), **kw)

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: dict[str, Any] | str,
        *,
        call_id: str = "call_1",
        fragments: list[str] | None = None,
        content: str | None = None,
        **kw: Any,
    ) -> Reply:
        """One native tool call; ``fragments`` (joined = the arguments) split it when streamed."""
        call = FakeToolCall(
            name=name,
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            id=call_id,
            fragments=tuple(fragments) if fragments is not None else None,
        )
        return cls(content=content, calls=(call,), **kw)

    @classmethod
    def tool_calls(cls, *calls: FakeToolCall, content: str | None = None, **kw: Any) -> Reply:
        """Several native tool calls in one message (give each a distinct ``id``)."""
        return cls(content=content, calls=tuple(calls), **kw)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "fake server error",
        *,
        retry_after: float | str | None = None,
        type_: str = "server_error",
        code: str | None = None,
        **kw: Any,
    ) -> Reply:
        """An OpenAI-style error body; ``retry_after`` sets the Retry-After header."""
        headers = dict(kw.pop("headers", ()))
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        return cls(
            status=status,
            error_body={"message": message, "type": type_, "param": None, "code": code},
            headers=tuple(headers.items()),
            **kw,
        )

    @classmethod
    def context_length_exceeded(cls, **kw: Any) -> Reply:
        """The 400 an OpenAI endpoint sends when the prompt does not fit the context window."""
        return cls.error(
            400,
            "This model's maximum context length is 4096 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            type_="invalid_request_error",
            code="context_length_exceeded",
            **kw,
        )

    @classmethod
    def malformed(cls, body: bytes = b'{"id": "chatcmpl-x", "choices": [', **kw: Any) -> Reply:
        """A 200 whose body is not valid JSON (a broken proxy, a truncated response)."""
        return cls(raw=body, **kw)

    @classmethod
    def endless(cls, piece: str = "more ", *, chunk_delay: float = 0.05, **kw: Any) -> Reply:
        """A model that never stops: streamed, ``piece`` every ``chunk_delay`` until the client
        closes the connection (recorded in ``server.disconnects``); unstreamed, it generates
        until the server closes, answering nothing."""
        return cls(content=piece, chunk_delay=chunk_delay, forever=True, **kw)

    @classmethod
    def fails_mid_stream(cls, content: str, message: str, *, code: int | str = 500, **kw: Any) -> Reply:
        """Streamed: ``content``, then ``data: {"error": {...}}`` on a 200 (vLLM, llama.cpp)."""
        return cls(content=content, stream_error={"message": message, "type": "server_error", "code": code}, **kw)

    def after(self, seconds: float) -> Reply:
        """The same reply, sent only after ``seconds`` (use it to trigger a client timeout)."""
        return replace(self, delay=seconds)


ReplySource = Reply | Callable[[RecordedRequest], Reply]


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: twenty clients connecting at once overflow it,
    # and the dropped connection attempts are retried by the kernel a second later.
    request_queue_size = 128


class FakeLLMServer:
    """The server: ``add`` replies, point a client at ``base_url``, read ``requests``.

    Thread-safe: the HTTP server runs in its own threads while the test's event loop calls it.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._script: list[ReplySource] = []
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.default: ReplySource | None = None
        self.disconnects: list[float] = []
        self._disconnected = threading.Event()
        # JSON answers to other paths (GET or POST), as local servers publish their settings:
        # ``server.pages["/props"] = {"default_generation_settings": {"n_ctx": 8192}}``.
        self.pages: dict[str, Any] = {}
        self.embed: Callable[[str], list[float]] | None = None
        self.embedding_requests: list[Any] = []  # the parsed bodies

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        handler = _make_handler(self)
        httpd = _Server((self._host, self._port), handler)
        httpd.daemon_threads = True
        # A handler held back by ``delay`` must not keep close() waiting.
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping in a delay
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- addresses -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake LLM server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to use as ``api_base`` for an ``openai/...`` model: ``<url>/v1``."""
        return f"{self.url}/v1"

    # -- scripting and inspection ----------------------------------------------------------

    def add(self, *replies: ReplySource) -> FakeLLMServer:
        """Queue replies; each request takes the next one, in order."""
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def wait_disconnect(self, timeout: float) -> float | None:
        """The ``time.monotonic()`` an endless stream's connection was first seen closed, waiting up
        to ``timeout`` seconds for it; None if none closed by then."""
        self._disconnected.wait(timeout)
        with self._lock:
            return self.disconnects[0] if self.disconnects else None

    def bodies(self) -> list[Any]:
        """The parsed JSON bodies of every request so far, in order."""
        with self._lock:
            return [r.body for r in self.requests]

    # -- used by the handler ---------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> tuple[Reply, int]:
        """Keep ``request``; return its reply and its 1-based number."""
        with self._lock:
            self.requests.append(request)
            number = len(self.requests)
            source: ReplySource | None = self._script.pop(0) if self._script else self.default
            if source is None:
                self.unexpected.append(request)
        if source is None:
            reply = Reply.error(
                400,
                f"fake LLM server: no reply scripted for request #{number}",
                type_="invalid_request_error",
            )
        else:
            reply = source(request) if callable(source) else source
        return reply, number

    def _saw_disconnect(self) -> None:
        with self._lock:
            self.disconnects.append(time.monotonic())
        self._disconnected.set()

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False when the server is closing meanwhile."""
        return not (seconds > 0 and self._closing.wait(seconds))


@pytest.fixture
def fake_llm_server() -> Iterator[FakeLLMServer]:
    """A started ``FakeLLMServer``, closed after the test."""
    with FakeLLMServer() as server:
        yield server


# -- wire format ---------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _usage(reply: Reply, request: RecordedRequest) -> dict[str, int]:
    answer_chars = len(reply.content or "") + sum(len(c.arguments) for c in reply.calls)
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = max(1, sum(len(_text_of(m.get("content"))) for m in request.messages) // 4)
    completion = reply.completion_tokens
    if completion is None:
        completion = max(1, answer_chars // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.calls else "stop")


def _completion_body(reply: Reply, request: RecordedRequest, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.calls
        ]
    body: dict[str, Any] = {
        "id": f"chatcmpl-fake{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": request.model or "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
    }
    if reply.include_usage is not False:
        body["usage"] = _usage(reply, request)
    return body


def _split_words(text: str) -> list[str]:
    """Split keeping the spaces, so the pieces join back to ``text`` exactly."""
    pieces: list[str] = []
    current = ""
    for ch in text:
        current += ch
        if ch == " ":
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces


def _stream_events(reply: Reply, request: RecordedRequest, n: int) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{n}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": request.model or "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.content:
        pieces = list(reply.chunks) if reply.chunks is not None else _split_words(reply.content)
        events.extend(chunk({"content": piece}) for piece in pieces)
    if reply.stream_error is not None:
        return [*events, {"error": reply.stream_error}]
    for index, call in enumerate(reply.calls):
        fragments = list(call.fragments) if call.fragments is not None else [call.arguments]
        # OpenAI sends id, type and name once, then the arguments in pieces under the same index.
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        events.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            for fragment in fragments
        )
    events.append(chunk({}, _finish_reason(reply)))
    send_usage = (
        reply.include_usage if reply.include_usage is not None else request.wants_stream_usage
    )
    if send_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = _usage(reply, request)
        events.append(last)
    return events


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps connections alive like a real endpoint does (measures true overhead).
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every response.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
            return  # keep test output clean

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            page = server.pages.get(self.path.split("?")[0])
            if page is not None:
                self._send_json(200, page)
                return
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            if self.path.split("?")[0] in server.pages:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send_json(200, server.pages[self.path.split("?")[0]])
                return
            if self.path.split("?")[0] in EMBEDDING_PATHS and server.embed is not None:
                self._send_embeddings(server.embed)
                return
            if self.path.split("?")[0] not in CHAT_PATHS:
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
                body=body,
                at=time.monotonic(),
                client_port=int(self.client_address[1]),
            )
            reply, number = server._record(request)
            if not server._wait(reply.delay):
                self.close_connection = True
                return
            try:
                self._respond(reply, request, number)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (timeout, cancellation): that is what the test wanted.
                self.close_connection = True

        def _respond(self, reply: Reply, request: RecordedRequest, n: int) -> None:
            extra = list(reply.headers)
            if reply.raw is not None:
                self._send(reply.status, reply.raw, reply.raw_type, extra)
            elif reply.error_body is not None:
                self._send_json(reply.status, {"error": reply.error_body}, extra)
            elif reply.forever:
                self._send_endless(reply, request, n, extra)
            elif request.stream:
                self._send_stream(reply, request, n, extra)
            else:
                self._send_json(reply.status, _completion_body(reply, request, n), extra)

        def _send_embeddings(self, embed: Callable[[str], list[float]]) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with server._lock:
                server.embedding_requests.append(body)
            texts = body.get("input") or []
            texts = [texts] if isinstance(texts, str) else texts
            vectors: list[Any] = [embed(str(t)) for t in texts]
            if body.get("encoding_format") == "base64":
                vectors = [base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() for v in vectors]
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            self._send_json(200, {"object": "list", "data": data, "model": body.get("model") or "fake",
                                  "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}})

        def _send_json(self, status: int, body: Any, extra: Sequence[tuple[str, str]] = ()) -> None:
            self._send(status, json.dumps(body).encode(), "application/json", extra)

        def _send(
            self, status: int, data: bytes, ctype: str, extra: Sequence[tuple[str, str]]
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _send_stream(
            self, reply: Reply, request: RecordedRequest, n: int, extra: Sequence[tuple[str, str]]
        ) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()
            end = reply.line_ending * 2
            events = [
                f"data: {json.dumps(e, ensure_ascii=reply.ascii_json)}{end}"
                for e in _stream_events(reply, request, n)
            ]
            events.append(f"data: [DONE]{end}")
            writes = [event.encode() for event in events]
            if reply.write_size is not None:
                data = b"".join(writes)
                writes = [data[i : i + reply.write_size] for i in range(0, len(data), reply.write_size)]
            for index, event in enumerate(writes):
                if index and not server._wait(reply.chunk_delay):
                    self.close_connection = True
                    return
                self._write_chunk(event)
            self._write_chunk(b"")

        def _send_endless(
            self, reply: Reply, request: RecordedRequest, n: int, extra: Sequence[tuple[str, str]]
        ) -> None:
            if not request.stream:
                server._closing.wait()  # generating, deaf to the client, until shutdown
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()
            event = {
                "id": f"chatcmpl-fake{n}",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": request.model or "fake",
                "choices": [{"index": 0, "delta": {"content": reply.content}, "finish_reason": None}],
            }
            data = f"data: {json.dumps(event)}\n\n".encode()
            self.close_connection = True
            try:
                while server._wait(reply.chunk_delay):
                    self._write_chunk(data)
            except OSError:  # the client closed the connection: the generation stops here
                server._saw_disconnect()

        def _write_chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler
