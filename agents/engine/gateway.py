"""The live LLM gateway: one litellm call per request, with its errors, usage and cost mapped.

This is the only module that imports litellm, and only inside functions: importing it costs
nothing, so daphne, workers and tests that never call a live model never pay litellm's ~2-4 s
import. Keys travel per call (never through ``os.environ``) and are scrubbed from every error.
``RoutingGateway`` is what the Django side uses: the offline demo model for ``demo/offline``,
litellm for everything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from agents.engine import model_facts, transcript
from agents.engine.capabilities import JSON_OBJECT, JSON_SCHEMA, STREAM, TOOLS
from agents.engine.demo import DEMO_MODEL, DemoGateway
from agents.engine.failures import kind_of_exception
from agents.engine.llm import (
    ContextLengthError,
    DeltaCallback,
    FormUnsupportedError,
    Gateway,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryableLLMError,
    ToolCall,
    ToolsUnsupportedError,
)
from agents.engine.refusals import VALIDATION_SHAPED, refused_form, retry_after_seconds
from agents.engine.specs import LLMSpec

__all__ = ["LiteLLMGateway", "RoutingGateway", "supports_tools"]

# Arguments the gateway sets itself: ``LLMSpec.params`` may not override them, so a stray
# "api_key" or "num_retries" in an LLM's params can neither leak nor double the retries.
_RESERVED_PARAMS = frozenset(
    {
        "model", "messages", "api_key", "api_base", "base_url", "timeout", "connect_timeout",
        "first_token_timeout", "stream",
        "stream_options", "tools", "tool_choice", "response_format", "stop", "num_retries",
        "max_retries", "mock_response", "metadata",
    }
)  # fmt: skip
_MAX_ERROR_CHARS = 1000


def _litellm() -> ModuleType:
    """Import litellm on first use, configured to stay offline and quiet."""
    # Without these, importing litellm fetches the model cost map from GitHub (up to 5 s on a
    # network that drops packets) and other catalogues on demand; the bundled copies suffice.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" / "Give Feedback" prints
    litellm.set_verbose = False  # never echo request kwargs (and so the key) to stdout
    return litellm


async def _litellm_loaded() -> ModuleType:
    """``_litellm()`` for async callers, importing in a thread the first time.

    The first import takes 2-4 s; off the loop, daphne keeps serving its websockets meanwhile.
    """
    if "litellm" in sys.modules:
        return _litellm()
    return await asyncio.to_thread(_litellm)


def supports_tools(model: str) -> bool:
    """Whether litellm's model map says ``model`` does native function calling ("auto" mode).

    False for models litellm does not know (custom endpoints), though many of them do support
    tools: treat False as "unknown", not as "no".
    """
    if model == DEMO_MODEL:
        return True
    if model.startswith(model_facts.PREFIX):
        return model_facts.supports_function_calling(model)  # without importing litellm
    try:
        return bool(_litellm().supports_function_calling(model=model))
    except Exception:  # noqa: BLE001 - an unknown provider is simply "not known to support"
        return False


class LiteLLMGateway:
    """Sends one ``LLMRequest`` through ``litellm.acompletion`` and reports the result.

    No retries here (``num_retries=0``, ``max_retries=0``): ``LLMCaller`` owns retries, backoff
    and rate limits, so every gateway behaves alike. Cancellation is the caller's too: the
    ``CancelToken`` cancels the task awaiting ``complete``, which closes the HTTP request.

    Timeouts (``LLMSpec``): connecting is httpx's, the first token and the whole call are timed
    here on the loop's clock, each an error saying which limit was passed: no first token in
    time is a ``RetryableLLMError``, no complete answer in time a plain ``LLMError`` (the same
    request would run as long again).
    """

    def __init__(self) -> None:
        self._prices: dict[str, tuple[float, float] | None] = {}

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        litellm = await _litellm_loaded()
        llm = request.llm
        secret = llm.api_key.get_secret_value() if llm.api_key is not None else None
        kwargs = self._kwargs(request, secret)
        started = time.perf_counter()
        if request.stream:
            raw, saw_usage = await self._stream(litellm, kwargs, request, secret, on_delta)
        else:
            limit = asyncio.timeout(llm.timeout)
            try:
                async with limit:
                    raw = await litellm.acompletion(**kwargs)
            except TimeoutError:
                if not limit.expired():
                    raise
                # Not retried: the same request would run as long again.
                raise LLMError(f"no complete answer within {llm.timeout:g} s") from None
            except Exception as exc:  # noqa: BLE001 - every failure becomes an LLMError
                raise _map_error(litellm, exc, secret, request) from None
            saw_usage = getattr(raw, "usage", None) is not None
        latency_ms = int((time.perf_counter() - started) * 1000)
        return self._response(litellm, raw, request, latency_ms, saw_usage)

    async def prices(self, llm: LLMSpec) -> tuple[float, float] | None:
        """``PriceList``: litellm's (bundled) price map, per token; None for a model not in it."""
        if llm.model not in self._prices:
            litellm = await _litellm_loaded()
            try:
                info = litellm.get_model_info(model=llm.model)
                found = (float(info["input_cost_per_token"] or 0.0), float(info["output_cost_per_token"] or 0.0))
            except Exception:  # noqa: BLE001 - unknown models have no price
                found = None
            self._prices[llm.model] = found  # the map is read once per model (~1 ms a look-up)
        return self._prices[llm.model]

    def _kwargs(self, request: LLMRequest, secret: str | None) -> dict[str, Any]:
        llm = request.llm
        kwargs: dict[str, Any] = {
            key: value for key, value in llm.params.items() if key not in _RESERVED_PARAMS
        }
        kwargs.update(
            model=llm.model,
            messages=request.messages,
            timeout=_http_timeout(llm, streamed=request.stream),
            num_retries=0,
            max_retries=0,
        )
        if llm.input_price_per_1k is not None or llm.output_price_per_1k is not None:
            # The LLM's own prices win (``_cost``): hand them to litellm too, so it prices the
            # call with them instead of searching its model map (and its fallbacks, for a model
            # it does not know) for a figure nobody reads: ~0.6 ms of CPU less per call.
            kwargs.setdefault("input_cost_per_token", (llm.input_price_per_1k or 0.0) / 1000)
            kwargs.setdefault("output_cost_per_token", (llm.output_price_per_1k or 0.0) / 1000)
        if secret:
            kwargs["api_key"] = secret
        if llm.api_base:
            kwargs["api_base"] = llm.api_base
        return request_options(request, kwargs)

    async def _stream(
        self,
        litellm: ModuleType,
        kwargs: dict[str, Any],
        request: LLMRequest,
        secret: str | None,
        on_delta: DeltaCallback | None,
    ) -> tuple[Any, bool]:
        llm = request.llm
        # One limit on the loop's clock: the first token's until it comes, then the whole call's.
        loop = asyncio.get_running_loop()
        total_at = loop.time() + llm.timeout
        limit = asyncio.timeout(min(llm.first_token_timeout, llm.timeout))
        chunks: list[Any] = []
        saw_usage = first = False
        try:
            async with limit:
                try:
                    stream = await litellm.acompletion(**kwargs)
                except Exception as exc:  # noqa: BLE001
                    raise _map_error(litellm, exc, secret, request) from None
                iterator = stream.__aiter__()
                try:
                    while True:
                        # Only litellm's own failures are mapped; an error raised by ``on_delta``
                        # (the event sink) is the caller's and must surface unchanged.
                        try:
                            chunk = await iterator.__anext__()
                        except StopAsyncIteration:
                            break
                        except Exception as exc:  # noqa: BLE001
                            raise _map_error(litellm, exc, secret, request) from None
                        chunks.append(chunk)
                        if not first and _has_token(chunk):
                            first = True
                            limit.reschedule(total_at)
                        saw_usage = saw_usage or getattr(chunk, "usage", None) is not None
                        if on_delta is not None and (text := _delta_text(chunk)):
                            await on_delta(text)
                finally:
                    # Release the connection now, also when cancelled or timed out mid-stream:
                    # a local server stops generating only when its connection closes.
                    aclose = getattr(stream, "aclose", None)
                    if aclose is not None:
                        with contextlib.suppress(Exception):  # closing is best effort
                            await aclose()
        except TimeoutError:
            if not limit.expired():
                raise
            if first or llm.timeout <= llm.first_token_timeout:
                # Not retried: the same request would run as long again.
                raise LLMError(f"no complete answer within {llm.timeout:g} s") from None
            raise RetryableLLMError(f"no first token within {llm.first_token_timeout:g} s") from None
        if not chunks or _not_an_event_stream(stream, chunks):
            # litellm turns a non-SSE body into an empty answer; say what really happened. A
            # refusal to stream: the caller asks again unstreamed and remembers it.
            raise FormUnsupportedError(
                f"{request.llm.model}: the provider's answer was not an event stream", form=STREAM
            )
        built = litellm.stream_chunk_builder(chunks, messages=request.messages)
        if built is None:
            raise LLMError(f"{request.llm.model}: the streamed answer could not be assembled")
        return built, saw_usage

    def _response(
        self,
        litellm: ModuleType,
        raw: Any,
        request: LLMRequest,
        latency_ms: int,
        saw_usage: bool,
    ) -> LLMResponse:
        llm = request.llm
        choices = getattr(raw, "choices", None) or []
        if not choices:
            raise LLMError(f"{llm.model}: the answer has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = (getattr(message, "content", None) or "") if message is not None else ""
        calls = [
            ToolCall(
                id=getattr(call, "id", None) or f"call_{index + 1}",
                name=call.function.name or "",
                arguments=call.function.arguments or "{}",
            )
            for index, call in enumerate(getattr(message, "tool_calls", None) or [])
        ]
        prompt_tokens, completion_tokens = _usage(litellm, raw, request, content, calls, saw_usage)
        return LLMResponse(
            content=content,
            tool_calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_cost(litellm, raw, llm, prompt_tokens, completion_tokens),
            latency_ms=latency_ms,
            finish_reason=getattr(choice, "finish_reason", None),
            model=getattr(raw, "model", None) or llm.model,
        )


class RoutingGateway:
    """The gateway the site uses: ``demo/offline`` answers offline, every other model live."""

    def __init__(
        self, *, live: Gateway | None = None, demo: Gateway | None = None, wire: Gateway | None = None
    ) -> None:
        from agents.engine import wire as direct  # it builds on this module

        self.live: Gateway = live if live is not None else LiteLLMGateway()
        self.demo: Gateway = demo if demo is not None else DemoGateway()
        # ``openai/…`` models go straight to their OpenAI-compatible endpoint (agents.engine.wire),
        # unless a test hands in its own live gateway.
        self.wire: Gateway | None = wire if wire is not None else (direct.WireGateway() if live is None else None)
        self._direct = direct.handles

    def route(self, llm: LLMSpec) -> Gateway:
        if llm.model == DEMO_MODEL:
            return self.demo
        if self.wire is not None and self._direct(llm):
            return self.wire
        return self.live

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        return await self.route(request.llm).complete(request, on_delta=on_delta)

    async def aclose(self) -> None:
        """Close the direct path's connections on this event loop."""
        if self.wire is not None and (close := getattr(self.wire, "aclose", None)) is not None:
            await close()

    async def prices(self, llm: LLMSpec) -> tuple[float, float] | None:
        """``PriceList``: the routed gateway's prices, if it tells any."""
        lookup = getattr(self.route(llm), "prices", None)
        return await lookup(llm) if lookup is not None else None


# OpenAI's reasoning models refuse ``max_tokens`` for ``max_completion_tokens``: o1, o3, o4-mini,
# gpt-5 but its chat variant (the names litellm renames it for), whatever the provider prefix.
_REASONING_MODEL = re.compile(r"^(?:o\d|gpt-5(?!-chat))")


def request_options(request: LLMRequest, into: dict[str, Any]) -> dict[str, Any]:
    """What ``request`` asks of the call beyond its messages, added to the arguments ``into`` (an
    LLM's own params already there): the shape both paths, litellm and the direct one, send.

    The budget's ``max_tokens`` caps the LLM's own limit unless that is lower, under the name the
    model takes: ``max_completion_tokens`` for a reasoning model or an LLM set up with that name.
    """
    if request.tools:
        into["tools"] = request.tools
        if request.tool_choice is not None:
            into["tool_choice"] = request.tool_choice
    if request.response_schema is not None:
        into["response_format"] = response_format(
            request.response_schema, request.purpose, form=request.response_form
        )
    if request.stop:
        into["stop"] = request.stop
    reasoning = _REASONING_MODEL.match(request.llm.model.rsplit("/", 1)[-1]) is not None
    if reasoning or "max_completion_tokens" in into:
        # The LLM's own max_tokens moves to the name the model takes (it refuses the other).
        name, own = "max_completion_tokens", [into.pop("max_tokens", None), into.get("max_completion_tokens")]
    else:
        name, own = "max_tokens", [into.get("max_tokens")]
    limits = [limit for limit in own if isinstance(limit, int) and limit > 0]
    if request.max_tokens is not None:
        limits.append(request.max_tokens)
    if limits:
        into[name] = min(limits)
    if request.stream:
        into["stream"] = True
        into["stream_options"] = {"include_usage": True}
    return into


def response_format(
    schema: Mapping[str, Any], purpose: str = "response", *, form: str = JSON_SCHEMA
) -> dict[str, Any]:
    """OpenAI's ``json_schema`` response format for a bare JSON schema (``form="json_object"``:
    JSON mode, which carries no schema; the prompt must describe it).

    A dict already shaped ``{"name": ..., "schema": {...}}`` is used as it is.
    """
    if form == JSON_OBJECT:
        return {"type": "json_object"}
    if isinstance(schema.get("schema"), Mapping):
        wrapped = dict(schema)
        wrapped.setdefault("name", purpose)
        return {"type": "json_schema", "json_schema": wrapped}
    # OpenAI accepts only [a-zA-Z0-9_-]{1,64} as the name.
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or purpose))[:64] or "response"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema)}}


def _http_timeout(llm: LLMSpec, *, streamed: bool) -> Any:
    """httpx's limits for one call (litellm hands an ``httpx.Timeout`` to the provider's client):
    ``connect_timeout`` to connect; each read waits up to the first-token limit when streamed (no
    chunk for that long is a stall), or the whole call's limit for an answer that comes at once.
    A second more on reads, so that the loop's timer, whose error names the limit, goes first."""
    import httpx  # loaded with litellm already

    read = (llm.first_token_timeout if streamed else llm.timeout) + 1.0
    return httpx.Timeout(read, connect=llm.connect_timeout)


def _has_token(chunk: Any) -> bool:
    """Whether a streamed chunk carries some of the answer (text, reasoning, a tool call, its end)."""
    for choice in getattr(chunk, "choices", None) or ():
        if getattr(choice, "finish_reason", None):
            return True
        delta = getattr(choice, "delta", None)
        if delta is not None and (
            getattr(delta, "content", None) or getattr(delta, "tool_calls", None)
            or getattr(delta, "reasoning_content", None)
        ):
            return True
    return False


def _delta_text(chunk: Any) -> str:
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ""
    delta = getattr(choices[0], "delta", None)
    return (getattr(delta, "content", None) or "") if delta is not None else ""


def _not_an_event_stream(stream: Any, chunks: list[Any]) -> bool:
    """An empty streamed answer whose HTTP body was plain JSON: a malformed stream."""
    for chunk in chunks:
        for choice in getattr(chunk, "choices", None) or []:
            delta = getattr(choice, "delta", None)
            if getattr(delta, "content", None) or getattr(delta, "tool_calls", None):
                return False
    hidden = getattr(stream, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, Mapping) else None
    content_type = (
        headers.get("llm_provider-content-type") if isinstance(headers, Mapping) else None
    )
    return isinstance(content_type, str) and content_type.startswith("application/json")


def _usage(
    litellm: ModuleType,
    raw: Any,
    request: LLMRequest,
    content: str,
    calls: list[ToolCall],
    saw_usage: bool,
) -> tuple[int, int]:
    usage = getattr(raw, "usage", None)
    prompt = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
    completion = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
    if saw_usage and (prompt or completion):
        return prompt, completion
    # The provider reported nothing: count locally, so budgets still see the call.
    answer = content + "".join(call.name + call.arguments for call in calls)
    model = request.llm.model
    try:
        prompt = prompt or int(litellm.token_counter(model=model, messages=request.messages))
        completion = completion or int(litellm.token_counter(model=model, text=answer or " "))
    except Exception:  # noqa: BLE001 - a rough count beats none
        chars = sum(len(str(m.get("content") or "")) for m in request.messages)
        prompt = prompt or chars // 4 + 1
        completion = completion or len(answer) // 4 + 1
    return prompt, completion


def _cost(
    litellm: ModuleType, raw: Any, llm: LLMSpec, prompt_tokens: int, completion_tokens: int
) -> float | None:
    """The LLM's own prices win; else litellm's price map; None when the model is unknown."""
    if llm.input_price_per_1k is not None or llm.output_price_per_1k is not None:
        return (
            prompt_tokens * (llm.input_price_per_1k or 0.0)
            + completion_tokens * (llm.output_price_per_1k or 0.0)
        ) / 1000
    hidden = getattr(raw, "_hidden_params", None)
    if isinstance(hidden, Mapping) and "response_cost" in hidden:
        # litellm priced it already (None: not in its map); asking again costs ~1.5 ms a try.
        cost = hidden["response_cost"]
        return float(cost) if cost is not None else None
    try:
        return float(litellm.completion_cost(completion_response=raw, model=llm.model))
    except Exception:  # noqa: BLE001 - unknown models have no price
        return None


def scrub(text: str, secret: str | None) -> str:
    """``text`` without the key, bearer tokens or anything shaped like an OpenAI key."""
    return transcript.scrub(text, (secret,) if secret else (), broad=True)


def _map_error(
    litellm: ModuleType, exc: Exception, secret: str | None, request: LLMRequest | None = None
) -> LLMError:
    """``_map_error_type``'s error with its kind of failure (``agents.engine.failures``) set."""
    error = _map_error_type(litellm, exc, secret, request)
    status = getattr(exc, "status_code", None)
    error.kind_hint = kind_of_exception(exc, status if isinstance(status, int) and not isinstance(status, bool) else None)
    return error


def _map_error_type(
    litellm: ModuleType, exc: Exception, secret: str | None, request: LLMRequest | None = None
) -> LLMError:
    """Turn whatever litellm raised into the engine's error taxonomy, key-free.

    Only what may go through on another try is retryable: 408, 409, 429, timeouts, dropped
    connections and plain 5xx. A refused form of request (``refusals.refused_form``) is a
    ``FormUnsupportedError``, whatever its status: llama-cpp-python and llama-server answer 500
    to a ``json_schema`` response format or to ``tools`` they cannot take. Any other 4xx, a
    validation error a server sends as a 5xx, and a body that is not JSON fail at once: the same
    request would fail alike.
    """
    detail = str(exc) or type(exc).__name__
    message = scrub(detail, secret)
    if len(message) > _MAX_ERROR_CHARS:
        message = message[:_MAX_ERROR_CHARS] + "…"
    lowered = detail.lower()
    if isinstance(exc, litellm.ContextWindowExceededError):
        return ContextLengthError(message)
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    client_error = status is not None and 400 <= status < 500 and status not in (408, 409, 429)
    if status not in (408, 409, 429):
        form = refused_form(lowered, request)
        if form == TOOLS:
            return ToolsUnsupportedError(message)
        if form is not None:
            return FormUnsupportedError(message, form=form)
    if _is_malformed_body(exc):
        # A body that is not JSON will not become JSON on a second try: fail for good.
        return LLMError(message)
    if client_error or isinstance(exc, litellm.BadRequestError):
        return LLMError(message)  # retrying sends the same bad request
    if VALIDATION_SHAPED.search(lowered):
        return LLMError(message)  # a server's request validation, reported as a 5xx
    retryable_types = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
        litellm.BadGatewayError,
        TimeoutError,
        ConnectionError,
    )
    if isinstance(exc, retryable_types) or (status is not None and (status in (408, 409, 429) or status >= 500)):
        return RetryableLLMError(message, retry_after=_retry_after(exc))
    return LLMError(message)


def _is_malformed_body(exc: BaseException) -> bool:
    """litellm reports an unparseable 200 as a 500; its cause chain tells the two apart."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, json.JSONDecodeError):
            return True
        if "no 'choices'" in str(current) or "Invalid response object" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _retry_after(exc: Exception) -> float | None:
    """Seconds from ``Retry-After`` / ``retry-after-ms`` on the error's response, if any."""
    response = getattr(exc, "response", None)
    for headers in (getattr(response, "headers", None), getattr(exc, "headers", None)):
        if headers and (seconds := retry_after_seconds(headers)) is not None:
            return seconds
    return None
