"""The LLM boundary: request/response types, the Gateway Protocol, its errors, a scripted gateway.

A gateway sends exactly one request and reports what came back; retries, rate limits, budgets,
cancellation and events live in ``agents.engine.calls`` so every gateway behaves alike.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agents.engine.failures import CONTEXT_TOO_LONG, kind_of_message
from agents.engine.specs import LLMSpec

Message = dict[str, Any]  # OpenAI chat format: {"role": ..., "content": ..., ...}
DeltaCallback = Callable[[str], Awaitable[None]]


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it

    def as_message_part(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(slots=True)
class LLMRequest:
    llm: LLMSpec
    messages: list[Message]
    purpose: str  # crew_plan, agent_plan, refine, observe, decide, replan, step, react, ...
    tools: list[dict[str, Any]] | None = None  # OpenAI function-tool schemas
    tool_choice: str | dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = None  # JSON schema for a structured answer
    # How ``response_schema`` goes out: as a ``json_schema`` response format, or as ``json_object``
    # (JSON mode: the schema is then only in the prompt), for servers that refuse the first.
    response_form: Literal["json_schema", "json_object"] = "json_schema"
    stop: list[str] | None = None
    # Whether the answer's deltas are shown as it comes (``llm.delta``). As sent by a gateway: a
    # streamed request; ``LLMCaller`` streams every request to an LLM that can stream, either way.
    stream: bool = False
    # A cap on the answer's tokens: what a token budget has left (``LLMCaller``). The LLM's own
    # ``max_tokens`` param, when lower, still wins.
    max_tokens: int | None = None


@dataclass(slots=True)
class LLMResponse:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: int = 0
    finish_reason: str | None = None
    model: str = ""


class Gateway(Protocol):
    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse: ...


class PriceList(Protocol):
    """What a gateway may also tell: a model's US dollars per prompt token and per completion
    token (None: it does not know). ``LLMCaller`` prices a call with it before making it when a
    cost budget applies and the LLM has no prices of its own."""

    async def prices(self, llm: LLMSpec) -> tuple[float, float] | None: ...


class LLMError(Exception):
    """A call failed for good. The message is safe to show: it never contains a key.

    ``retries_spent`` is set on what ``LLMCaller.call`` raises: that call was already tried as
    often as its LLM allows (``max_retries``), or would fail alike again, so no layer above (an
    agent's ``max_retry_limit``) tries it once more.
    """

    retries_spent: bool = False
    # The kind of provider failure (``agents.engine.failures.KINDS``): the gateway sets it from
    # what litellm raised; otherwise it is read from the message.
    kind_hint: str | None = None

    @property
    def kind(self) -> str:
        return self.kind_hint or kind_of_message(str(self))


class RetryableLLMError(LLMError):
    """429, 5xx, timeouts, dropped connections: worth another attempt after a backoff."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ContextLengthError(LLMError):
    """The messages do not fit the model's context window."""

    kind_hint = CONTEXT_TOO_LONG


class FormUnsupportedError(LLMError):
    """The provider refused a form of request it does not support: ``form`` is one of ``FORMS``.

    Sending the same request again would be refused again: the caller negotiates down to a
    simpler form and remembers the refusal for that LLM (``agents.engine.capabilities``).
    """

    form: str = ""

    def __init__(self, message: str, *, form: str | None = None) -> None:
        super().__init__(message)
        if form is not None:
            self.form = form


class ToolsUnsupportedError(FormUnsupportedError):
    """The provider rejected the ``tools`` parameter: the caller downgrades to text mode."""

    form = "tools"


Script = LLMResponse | str | Exception | Callable[[LLMRequest], "LLMResponse | str"]


class ScriptedGateway:
    """Answers from a list, in order, and records every request: the LLM of engine tests.

    A script item is an ``LLMResponse``, plain text, an exception to raise, or a function of the
    request. Running out of script is an ``AssertionError`` so a test sees an unexpected call.
    """

    def __init__(self, script: Sequence[Script] = (), *, default: Script | None = None) -> None:
        self.script: list[Script] = list(script)
        self.default = default
        self.requests: list[LLMRequest] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    def purposes(self) -> list[str]:
        return [r.purpose for r in self.requests]

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        self.requests.append(request)
        if self.script:
            item = self.script.pop(0)
        elif self.default is not None:
            item = self.default
        else:
            raise AssertionError(f"unexpected LLM call #{len(self.requests)} ({request.purpose})")
        if callable(item) and not isinstance(item, (LLMResponse, Exception)):
            item = item(request)
        if isinstance(item, Exception):
            raise item
        response = LLMResponse(content=item) if isinstance(item, str) else item
        if not response.prompt_tokens:
            response.prompt_tokens = sum(len(str(m.get("content") or "")) for m in request.messages) // 4
        if not response.completion_tokens:
            response.completion_tokens = max(1, len(response.content) // 4)
        response.model = response.model or request.llm.model
        if on_delta is not None and request.stream and response.content:
            await on_delta(response.content)
        return response


def tool_call_response(name: str, arguments: dict[str, Any] | str, *, call_id: str = "call_1") -> LLMResponse:
    """A response whose only content is one native tool call (for scripts)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return LLMResponse(tool_calls=[ToolCall(id=call_id, name=name, arguments=args)], finish_reason="tool_calls")
