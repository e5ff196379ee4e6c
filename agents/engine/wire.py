"""The direct path to OpenAI-compatible endpoints: one aiohttp request per call, no litellm on it.

Bench: ``bench/engine.py --ab wire`` (issue #20) measures this path against litellm's for the
same calls in the same run; the figure lives in bench/README.md. Every model written
``openai/<name>`` takes it (OpenAI itself, and the llama.cpp, vLLM and LM Studio presets, which
are OpenAI-compatible servers at an ``api_base``); every other provider stays on litellm, which
also remains the source of prices and token counts. ``PLANNER_LLM_PATH=litellm`` sends every
model through litellm again.

It keeps the gateway's contract (``agents.engine.gateway``): no retries here, timeouts on the
loop's clock naming the limit passed, errors in the engine's taxonomy with the key scrubbed, a
refused form of request reported as such, and the connection closed when the call is cancelled.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import ssl
import time
import weakref
from collections.abc import Mapping
from typing import Any

import aiohttp

from agents.engine import model_facts, wire_http
from agents.engine.capabilities import STREAM, TOOLS
from agents.engine.failures import TIMEOUT, UNREACHABLE, kind_of_exception
from agents.engine.gateway import _RESERVED_PARAMS, _litellm_loaded, request_options, scrub
from agents.engine.llm import (
    ContextLengthError,
    DeltaCallback,
    FormUnsupportedError,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryableLLMError,
    ToolCall,
    ToolsUnsupportedError,
)
from agents.engine.refusals import VALIDATION_SHAPED, refused_form, retry_after_seconds
from agents.engine.specs import LLMSpec

PREFIX = "openai/"
USER_AGENT = "crew-planner"
OPENAI_BASE = "https://api.openai.com/v1"
_MAX_ERROR_CHARS = 1000
_log = logging.getLogger(__name__)
# Keys of ``LLMSpec.params`` that are litellm's own switches, not the provider's: never sent.
_LITELLM_ONLY = frozenset(
    {"drop_params", "custom_llm_provider", "input_cost_per_token", "output_cost_per_token",
     "api_version", "litellm_logging_obj", "caching", "organization", "headers"}
)  # fmt: skip


def handles(llm: LLMSpec) -> bool:
    """Whether ``llm`` goes the direct way (``openai/…``, unless ``PLANNER_LLM_PATH=litellm``)."""
    return llm.model.startswith(PREFIX) and os.environ.get("PLANNER_LLM_PATH", "") != "litellm"


_ssl_context: ssl.SSLContext | None = None


def tls() -> ssl.SSLContext | bool:
    """One TLS setting for every client (building a context reads the CA bundle, ~10 ms): the
    bundle ``SSL_CERT_FILE`` names (an internal CA), else certifi's, as litellm's client does;
    ``SSL_VERIFY=false`` turns checking off, as it does in litellm."""
    global _ssl_context
    if os.environ.get("SSL_VERIFY", "").lower() in ("false", "0", "no"):
        return False
    if _ssl_context is None:
        import certifi  # the CA bundle litellm's client uses

        _ssl_context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or certifi.where())
    return _ssl_context


# Loops that outlive the runs on them (serve's: every run of the process goes to Daphne's loop),
# and the one session each keeps for all of them.
_lasting_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_kept: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, wire_http.Client] = weakref.WeakKeyDictionary()


def keep_sessions_on(loop: asyncio.AbstractEventLoop) -> None:
    """Let every gateway on ``loop`` share one session, kept after each run: its kept-alive
    connections (and their TLS) serve the next run's calls, instead of each run connecting anew
    to its provider. Closed by ``close_kept_sessions``, else with its loop."""
    _lasting_loops.add(loop)


async def close_kept_sessions() -> None:
    """Close the session kept on this loop (a server shutting down); a run still calling after
    that gets a session of its own, closed with the run."""
    loop = asyncio.get_running_loop()
    _lasting_loops.discard(loop)
    client = _kept.pop(loop, None)
    if client is not None:
        await client.aclose()


class WireGateway:
    """``Gateway`` for OpenAI-compatible chat completions, streamed or not, over aiohttp.

    One ``aiohttp.ClientSession`` per event loop keeps connections alive between a run's calls
    (a session belongs to the loop it was made on; runs on other loops get their own), with the
    proxies the environment named when it was made (``HTTPS_PROXY``, ``NO_PROXY``). On a loop that
    outlives its runs (``keep_sessions_on``) the gateways share that loop's session, so a
    provider's connections outlive the run too. Cookies stay each gateway's (a run's): a
    provider's cookies are sent back on that run's next calls, never on another person's.
    """

    def __init__(self) -> None:
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, wire_http.Client] = (
            weakref.WeakKeyDictionary()
        )
        self._cookies: aiohttp.CookieJar | None = None  # made on first use: it wants a running loop

    def _client(self) -> wire_http.Client:
        loop = asyncio.get_running_loop()
        kept = loop in _lasting_loops
        clients = _kept if kept else self._clients
        client = clients.get(loop)
        if client is None or client.closed:
            # Shared by every run of the process, the kept session has no cap of its own: its
            # runs' limits (workers, rpm) bound it, and waiting for a free connection would
            # count against a call's connect timeout.
            client = clients[loop] = wire_http.Client(tls(), USER_AGENT, limit=0 if kept else 100)
        return client

    async def aclose(self) -> None:
        """Close this loop's session and its kept-alive connections (a run or a drafting ends;
        a loop made for one call ends with it, so its session must not outlive it), unless the
        loop keeps its session for the next run."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    async def prices(self, llm: LLMSpec) -> tuple[float, float] | None:
        """``PriceList``: litellm's bundled price map, per token; None for a model not in it."""
        return await prices(llm)

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        llm = request.llm
        secret = llm.api_key.get_secret_value() if llm.api_key is not None else None
        body = _body(request)
        read = (llm.first_token_timeout if request.stream else llm.timeout) + 1.0
        loop = asyncio.get_running_loop()
        total_at = loop.time() + llm.timeout
        # One limit on the loop's clock: the first token's until it comes, then the whole call's.
        first_limit = min(llm.first_token_timeout, llm.timeout) if request.stream else llm.timeout
        limit = asyncio.timeout(first_limit)
        started = time.perf_counter()
        state = _Stream()
        try:
            async with limit:
                client = self._client()
                url = wire_http.endpoint(llm.api_base or OPENAI_BASE)
                proxy, proxy_headers = client.proxies(url)
                try:
                    # Redirects are reported (``_redirected``), not followed: a POST must not turn
                    # into a GET on the way.
                    response = await client.session.request(
                        "POST",
                        url,
                        data=json.dumps(body).encode(),
                        # An https:// call tunnels (the login goes with CONNECT, never to the
                        # provider); an http:// one is sent to the proxy, its login beside it.
                        headers=_headers(llm, secret) if proxy_headers is None or url.scheme == "https"
                        else {**_headers(llm, secret), **proxy_headers},
                        allow_redirects=False,
                        proxy=proxy,
                        proxy_headers=proxy_headers,
                        timeout=wire_http.timeout(llm.connect_timeout, read),
                        cookies=self._cookies.filter_cookies(url) if self._cookies else None,
                    )
                    if response.cookies:
                        if self._cookies is None:  # ``unsafe``: a server named by its IP address too
                            self._cookies = aiohttp.CookieJar(unsafe=True)
                        self._cookies.update_cookies(response.cookies, response.url)
                except aiohttp.ClientError as exc:
                    raise _transport_error(exc, llm, secret) from None
                except ValueError as exc:  # a header aiohttp refuses to send: a key with a line break
                    raise LLMError(scrub(f"{llm.model}: the request could not be sent: {exc}", secret)) from None
                if _log.isEnabledFor(logging.DEBUG):  # what httpx logged; never the headers
                    _log.debug("POST %s: %s %s", url, response.status, response.reason)
                try:
                    if response.status >= 400:
                        raw = await _read(response, llm, secret)
                        raise _status_error(response.status, raw, response.headers, secret, request)
                    if 300 <= response.status < 400:
                        raise _redirected(response, llm, secret)
                    ctype = response.headers.get("content-type", "")
                    if request.stream and not ctype.startswith("application/json"):
                        # An event stream; a server that labels it otherwise is read all the same.
                        await _read_events(response, state, request, secret, on_delta, limit, total_at)
                    elif request.stream:
                        # JSON to a streamed request: an error (raised as such), or an answer from
                        # a server that does not stream, asked again unstreamed and remembered.
                        _error_in(await _read(response, llm, secret), request, secret)
                        raise FormUnsupportedError(
                            f"{llm.model}: the provider's answer was not an event stream", form=STREAM
                        )
                    else:
                        state.whole(_parse(await _read(response, llm, secret), llm, request, secret))
                finally:
                    # The connection is kept when the body was read to its end, else closed (also
                    # when cancelled: a local server stops generating).
                    response.release()
        except TimeoutError:
            if not limit.expired():
                raise
            if not request.stream or state.first or llm.timeout <= llm.first_token_timeout:
                raise LLMError(f"no complete answer within {llm.timeout:g} s") from None
            raise RetryableLLMError(f"no first token within {llm.first_token_timeout:g} s") from None
        latency_ms = int((time.perf_counter() - started) * 1000)
        return await _response(state, request, latency_ms)


class _Stream:
    """What the answer's chunks (or its one body) said so far."""

    __slots__ = ("text", "calls", "finish", "model", "usage", "first", "events", "last_index")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument pieces]]
        self.finish: str | None = None
        self.model = ""
        self.usage: Mapping[str, Any] | None = None
        self.first = False
        self.events = 0  # data events read
        self.last_index: int | None = None  # the tool call the last fragment went to

    def whole(self, data: Mapping[str, Any]) -> None:
        self.model = str(data.get("model") or "")
        self.usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else None
        choice = _first_choice(data)
        message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
        self.finish = choice.get("finish_reason")
        if isinstance(message.get("content"), str):
            self.text.append(message["content"])
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise LLMError(f"the answer's tool_calls is not a list: {type(calls).__name__}")
        for index, call in enumerate(calls):
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                raise LLMError("a tool call in the answer has no function")
            self.calls[index] = [call.get("id"), _text(function.get("name")), [_arguments(function.get("arguments"))]]

    def chunk(self, data: dict[str, Any]) -> str:
        """Fold one streamed chunk (as ``json.loads`` made it: objects are dicts) in; the text it
        added. Run for every chunk of every streamed call, so it asks each field once."""
        if data.get("model"):
            self.model = str(data["model"])
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        choices = data.get("choices")
        # The first choice (index 0): with ``n`` > 1 a chunk may carry another one's text.
        if not isinstance(choices, list) or not choices:
            return ""
        choice = choices[0]
        if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
            choice = _first_choice(data)
            if not choice:
                return ""
        if choice.get("finish_reason"):
            self.finish = choice["finish_reason"]
            self.first = True
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return ""
        text = delta.get("content")
        if text and isinstance(text, str):
            self.text.append(text)
            self.first = True
        else:
            text = ""
        # A thinking model is answering, if not aloud: the delta fields in which vLLM, llama.cpp,
        # Ollama and OpenRouter stream its thinking.
        if not self.first and (delta.get("reasoning_content") or delta.get("reasoning") or delta.get("thinking")):
            self.first = True
        fragments = delta.get("tool_calls")
        if fragments:
            self._fragments(fragments)
        return text

    def _fragments(self, fragments: Any) -> None:
        """Fold a chunk's tool-call fragments in."""
        if not isinstance(fragments, list):
            raise LLMError(f"a streamed tool call is not a list: {type(fragments).__name__}")
        for fragment in fragments:
            if not isinstance(fragment, dict):
                raise LLMError("a streamed tool call fragment is not an object")
            self.first = True
            index = fragment.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                # No index: the call under way goes on, unless the fragment opens a new one.
                new = fragment.get("id") and all(fragment.get("id") != c[0] for c in self.calls.values())
                index = len(self.calls) if new or self.last_index is None else self.last_index
            self.last_index = index
            call = self.calls.setdefault(index, [None, "", []])
            function = fragment.get("function") if isinstance(fragment.get("function"), dict) else {}
            call[0] = call[0] or fragment.get("id")
            call[1] = _text(function.get("name")) or call[1]  # sent once, or repeated whole
            call[2].append(_arguments(function.get("arguments")))


def _first_choice(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The first choice (index 0): with ``n`` > 1 a chunk may carry another one's text."""
    choices = data.get("choices")
    if not isinstance(choices, list):
        return {}
    for choice in choices:
        if isinstance(choice, Mapping) and choice.get("index", 0) in (0, None):
            return choice
    return {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _arguments(value: Any) -> str:
    """A tool call's arguments as text; a server that sends them as an object gets them dumped."""
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (Mapping, list)) else ""


_raw_decode = json.JSONDecoder().raw_decode


def _chunk_json(payload: str) -> Any:
    """``json.loads`` of a chunk's payload, stripped already: the decoder's ``raw_decode``,
    without the wrapper's whitespace matching (a third of the decoding of a chunk of one token).
    Raises ``ValueError`` for what ``json.loads`` would refuse."""
    value, end = _raw_decode(payload)  # JSONDecodeError, a ValueError, for what is not JSON
    if end != len(payload):
        raise ValueError("extra data after the JSON value")
    return value


def _body(request: LLMRequest) -> dict[str, Any]:
    llm = request.llm
    body: dict[str, Any] = {
        key: value for key, value in llm.params.items()
        if key not in _RESERVED_PARAMS and key not in _LITELLM_ONLY and key not in ("extra_body", "extra_headers")
    }  # fmt: skip
    extra = llm.params.get("extra_body")
    if isinstance(extra, Mapping):
        body.update({k: v for k, v in extra.items() if k not in _RESERVED_PARAMS})
    body["model"] = llm.model[len(PREFIX):] if llm.model.startswith(PREFIX) else llm.model
    body["messages"] = request.messages
    return request_options(request, body)


def _headers(llm: LLMSpec, secret: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for name in ("headers", "extra_headers"):  # litellm's two spellings
        extra = llm.params.get(name)
        if isinstance(extra, Mapping):
            headers.update({str(k): str(v) for k, v in extra.items() if str(k).lower() != "authorization"})
    if isinstance(llm.params.get("organization"), str):
        headers["OpenAI-Organization"] = llm.params["organization"]
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    return headers


async def _read(response: aiohttp.ClientResponse, llm: LLMSpec, secret: str | None) -> bytes:
    try:
        return await response.read()
    except aiohttp.ClientError as exc:
        raise _transport_error(exc, llm, secret) from None


def _parse(raw: bytes, llm: LLMSpec, request: LLMRequest, secret: str | None) -> Mapping[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise LLMError(f"{llm.model}: the answer is not valid JSON") from None
    if isinstance(data, Mapping) and data.get("error"):  # an error sent with a 200
        raise _status_error(_error_status(data["error"]), raw, {}, secret, request)
    if not isinstance(data, Mapping) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise LLMError(f"{llm.model}: the answer has no choices")
    return data


def _error_in(raw: bytes, request: LLMRequest, secret: str | None) -> None:
    """Raise the error a JSON body holds ({"error": ...}), if it holds one."""
    try:
        data = json.loads(raw)
    except ValueError:
        return
    if isinstance(data, Mapping) and data.get("error"):
        raise _status_error(_error_status(data["error"]), raw, {}, secret, request)


def _error_status(error: Any) -> int:
    """The HTTP status an error object sent in a 200 (or in a stream) stands for: its numeric
    ``code``, else 500."""
    code = error.get("code") if isinstance(error, Mapping) else None
    if isinstance(code, str) and code.isdecimal():
        code = int(code)
    return code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600 else 500


def _redirected(response: aiohttp.ClientResponse, llm: LLMSpec, secret: str | None) -> LLMError:
    where = scrub(response.headers.get("location", "") or "?", secret)
    error = LLMError(
        f"{response.status} the API base {llm.api_base or OPENAI_BASE} redirects to {where}: "
        "set the LLM's API base to the address it names"
    )
    error.kind_hint = "other"
    return error


async def _read_events(
    response: aiohttp.ClientResponse,
    state: _Stream,
    request: LLMRequest,
    secret: str | None,
    on_delta: DeltaCallback | None,
    limit: asyncio.Timeout,
    total_at: float,
) -> None:
    """Read server-sent events to ``data: [DONE]`` (or the end), folding each chunk in.

    Run for every chunk of every streamed call (issue #20): the socket is read here, without an
    iterator between, and each chunk decoded by ``_chunk_json``.
    """
    llm = request.llm
    content = response.content
    lines = wire_http.SSELines(wire_http.encoding(response))
    done = False
    more = True
    while more:
        # Only the transport's failures are mapped; an error raised by ``on_delta`` (the event
        # sink) is the caller's and surfaces unchanged.
        try:
            data = await content.readany()
        except aiohttp.ClientError as exc:
            raise _transport_error(exc, llm, secret) from None
        more = bool(data)  # b"": the body's end
        for line in lines.feed(data) if more else lines.end():
            if done or not line.startswith("data:"):
                continue  # blank separators, comments (": ping"), event names; the body's end
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True  # read on to the end of the body, so the connection can be kept
                continue
            try:
                chunk = _chunk_json(payload)
            except ValueError:
                raise LLMError(f"{llm.model}: a streamed chunk is not valid JSON") from None
            if not isinstance(chunk, dict):
                continue
            state.events += 1
            if chunk.get("error"):  # vLLM and llama.cpp report failures in-stream
                raise _status_error(_error_status(chunk["error"]), json.dumps(chunk).encode(), {}, secret, request)
            was_first = state.first
            text = state.chunk(chunk)
            if state.first and not was_first:
                limit.reschedule(total_at)
            if on_delta is not None and text:
                await on_delta(text)
    if state.first and not done and state.finish is None:
        # The body ended (the server closed the connection) with neither ``[DONE]`` nor a finish
        # reason: a cut-off answer, not a short one. Asked again rather than kept as the answer.
        raise RetryableLLMError(f"{llm.model}: the stream ended before the answer did")
    if not state.first and state.usage is None:
        if not state.events:
            # Nothing an event stream would hold (HTML from a proxy, plain text): as litellm
            # does with a body that is not a stream, a refusal to stream, asked again unstreamed.
            raise FormUnsupportedError(f"{llm.model}: the provider's answer was not an event stream", form=STREAM)
        raise LLMError(f"{llm.model}: the stream ended without an answer")


async def _response(state: _Stream, request: LLMRequest, latency_ms: int) -> LLMResponse:
    llm = request.llm
    content = "".join(state.text)
    calls = [
        ToolCall(id=call[0] or f"call_{n + 1}", name=call[1], arguments="".join(call[2]) or "{}")
        for n, (_index, call) in enumerate(sorted(state.calls.items()))
    ]
    usage = state.usage or {}
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    if not (prompt or completion):
        prompt, completion = await _local_count(request, content, calls)
    return LLMResponse(
        content=content,
        tool_calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=await _cost(llm, prompt, completion),
        latency_ms=latency_ms,
        finish_reason=state.finish,
        model=state.model or llm.model,
    )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


async def _local_count(request: LLMRequest, content: str, calls: list[ToolCall]) -> tuple[int, int]:
    """The provider reported no usage: count with litellm's tokenizers, so budgets see the call."""
    answer = content + "".join(call.name + call.arguments for call in calls)
    try:
        litellm = await _litellm_loaded()
        model = request.llm.model
        prompt = int(litellm.token_counter(model=model, messages=request.messages))
        return prompt, int(litellm.token_counter(model=model, text=answer or " "))
    except Exception:  # noqa: BLE001 - a rough count beats none
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        return chars // 4 + 1, len(answer) // 4 + 1


async def prices(llm: LLMSpec) -> tuple[float, float] | None:
    """Per-token prices from litellm's bundled map, read without importing litellm; None when
    the model is not in it."""
    return model_facts.prices(llm.model)


async def _cost(llm: LLMSpec, prompt: int, completion: int) -> float | None:
    """The LLM's own prices win; else litellm's price map; None when the model is unknown."""
    if llm.input_price_per_1k is not None or llm.output_price_per_1k is not None:
        return (prompt * (llm.input_price_per_1k or 0.0) + completion * (llm.output_price_per_1k or 0.0)) / 1000
    found = await prices(llm)
    return None if found is None else prompt * found[0] + completion * found[1]


def _message(raw: bytes) -> str:
    """The provider's own words from an error body ({"error": {"message"}} or the text)."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    error = data.get("error") if isinstance(data, Mapping) else None
    if isinstance(error, Mapping) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if isinstance(data, Mapping) and isinstance(data.get("message") or data.get("detail"), str):
        return str(data.get("message") or data.get("detail"))
    return text


def _status_error(
    status: int, raw: bytes, headers: Mapping[str, str], secret: str | None, request: LLMRequest
) -> LLMError:
    """An HTTP error answer in the engine's taxonomy and its kind of failure (``failures``)."""
    error = _status_error_type(status, raw, headers, secret, request)
    error.kind_hint = kind_of_exception(error, status)
    return error


def _status_error_type(
    status: int, raw: bytes, headers: Mapping[str, str], secret: str | None, request: LLMRequest
) -> LLMError:
    """An HTTP error answer in the engine's taxonomy (the same rules as ``gateway._map_error``)."""
    words = _message(raw)
    detail = f"{status} {words}".strip()
    message = scrub(detail, secret)
    if len(message) > _MAX_ERROR_CHARS:
        message = message[:_MAX_ERROR_CHARS] + "…"
    lowered = (words + " " + raw.decode("utf-8", "replace")).lower()
    if _CONTEXT.search(lowered):
        return ContextLengthError(message)
    if status not in (408, 409, 429):
        form = refused_form(lowered, request)
        if form == TOOLS:
            return ToolsUnsupportedError(message)
        if form is not None:
            return FormUnsupportedError(message, form=form)
    if status in (408, 409, 429):
        return RetryableLLMError(message, retry_after=retry_after_seconds(headers))
    if status < 500 or VALIDATION_SHAPED.search(lowered):
        return LLMError(message)  # retrying sends the same bad request
    return RetryableLLMError(message, retry_after=retry_after_seconds(headers))


def _transport_error(exc: aiohttp.ClientError, llm: LLMSpec, secret: str | None) -> LLMError:
    """No HTTP answer: the host could not be reached, or the connection dropped. Retryable."""
    where = llm.api_base or OPENAI_BASE
    kind = None
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        text, kind = f"could not connect to {where} within {llm.connect_timeout:g} s", UNREACHABLE
    elif isinstance(exc, aiohttp.ClientConnectorError):  # refused, no such host, TLS, the proxy
        text, kind = f"could not connect to {where}: {exc or type(exc).__name__}", UNREACHABLE
    elif isinstance(exc, aiohttp.ServerTimeoutError):  # no byte within the read limit
        text, kind = f"no answer from {where} in time (ReadTimeout)", TIMEOUT
    elif isinstance(exc, (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError)):  # its words: the URL
        text = f"the connection to {where} failed: not an http:// or https:// address"
    else:
        text = f"the connection to {where} failed: {exc or type(exc).__name__}"
    error = RetryableLLMError(scrub(text, secret))
    error.kind_hint = kind
    return error


# A provider's words for a prompt over the model's window (OpenAI's code, vLLM, llama.cpp, Groq).
_CONTEXT = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window|exceeds the context"
    r"|prompt is too long|too many tokens|exceed_context_size"
)
