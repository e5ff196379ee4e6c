"""One way to call an LLM: cancel check, budgets, rate limit, retries with backoff, events, usage.

Every caller in the engine (crew planner, agent planner, observer, steps, ReAct, synthesis) goes
through ``LLMCaller.call`` so that limits and accounting hold everywhere alike.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents.engine.capabilities import STREAM, Capabilities
from agents.engine.failures import UNREACHABLE
from agents.engine.llm import (
    DeltaCallback,
    FormUnsupportedError,
    Gateway,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryableLLMError,
)
from agents.engine.runtime import CancelToken, Clock, EventEmitter, Usage
from agents.engine.specs import Budget
from agents.engine.transcript import call_record

# The fewest answer tokens worth paying a prompt for: a token budget whose remainder after the
# prompt is smaller stops the run before the call (``budget.exceeded``), rather than buy the whole
# prompt for an answer cut off after a few tokens (read as a format error, then retried).
MIN_ANSWER_TOKENS = 16


# The answer tokens a call may take when neither the request nor its LLM caps them, by what the
# call is for (``LLMRequest.purpose``); sent as ``max_tokens``, and what a cost budget prices the
# next answer at. A verdict is short, a plan medium, an answer long: a local model that loops on
# one phrase stops there instead of generating until its context window is full.
PURPOSE_MAX_COMPLETION_TOKENS = {
    "observe": 1024, "decide": 1024,
    "agent_plan": 2048, "refine": 2048, "replan": 2048, "crew_plan": 4096,
    "step": 4096, "react": 4096, "synthesis": 4096, "aggregate": 4096,
}  # fmt: skip
DEFAULT_MAX_COMPLETION_TOKENS = 4096  # any other purpose

# Room kept free in the context window besides the estimated prompt (and an eighth of it, for a
# tokenizer that counts more than 4 characters a token): chat-template tokens, the estimate's error.
WINDOW_MARGIN_TOKENS = 64


def _usd(amount: float) -> str:
    """US dollars to the hundredth of a cent (a smaller amount to its first digits)."""
    if amount == 0 or amount >= 0.0001:
        return f"${amount:.4f}"
    return f"${amount:.2g}"


class BudgetExceeded(Exception):
    """A limit would be passed by the next call; the run stops and keeps its partial results.

    ``used`` is what was used; ``next_call`` (cost only) what the call refused could have cost.
    """

    def __init__(self, limit: str, used: float, allowed: float, *, next_call: float | None = None) -> None:
        if limit == "max_cost_usd":
            message = f"budget exceeded: {limit} used {_usd(used)} of {_usd(allowed)}"
            if next_call is not None:
                message += f"; the next call could cost up to {_usd(next_call)}"
        else:
            message = f"budget exceeded: {limit} used {used:g} of {allowed:g}"
        super().__init__(message)
        self.limit = limit
        self.used = used
        self.allowed = allowed
        self.next_call = next_call


# A wait for a rate limiter's slot longer than this is said (``llm.waiting``): a shorter one would
# only flash on the run page.
WAIT_WORTH_SAYING = 1.0


class RateLimiter:
    """A sliding one-minute window of request start times; waits only until a slot frees."""

    def __init__(self, rpm: int, clock: Clock) -> None:
        self.rpm = rpm
        self.clock = clock
        self._starts: collections.deque[float] = collections.deque()

    async def acquire(self, cancel: CancelToken | None = None,
                      on_wait: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Take a slot, waiting until one frees; ``on_wait`` hears the first wait longer than
        ``WAIT_WORTH_SAYING`` seconds before it starts, once: the callers queued here all wake as
        the window moves and all but one wait again, which said each time grew with the square of
        the queue (20 calls at 1 rpm: 190 ``llm.waiting`` events)."""
        said = False
        while True:
            now = self.clock.monotonic()
            while self._starts and now - self._starts[0] >= 60.0:
                self._starts.popleft()
            if len(self._starts) < self.rpm:
                self._starts.append(now)
                return
            wait = 60.0 - (now - self._starts[0])
            if on_wait is not None and not said and wait > WAIT_WORTH_SAYING:
                said = True
                await on_wait(wait)
            if cancel is not None:
                await cancel.race(self.clock.sleep(wait))
            else:
                await self.clock.sleep(wait)


@dataclass
class RateLimiters:
    """One limiter per LLM key, shared by every caller in the process that holds this object."""

    clock: Clock
    _by_key: dict[tuple[str, int], RateLimiter] = field(default_factory=dict)

    def get(self, key: str, rpm: int | None) -> RateLimiter | None:
        if not rpm:
            return None
        limiter = self._by_key.get((key, rpm))
        if limiter is None:
            limiter = self._by_key[(key, rpm)] = RateLimiter(rpm, self.clock)
        return limiter


@dataclass(slots=True)
class BudgetScope:
    """A budget and the usage it is measured against (the crew's run, or one agent)."""

    budget: Budget
    usage: Usage
    name: str = "crew"


def check_budget(scope: BudgetScope, *, next_input_tokens: int = 0, next_cost: float | None = None,
                 tool_call: bool = False) -> None:
    """Raise ``BudgetExceeded`` when the next call (or tool call) could pass a limit of ``scope``.

    ``next_cost`` is the next call's worst case in US dollars (``LLMCaller.worst_cost``): a cost
    budget is a hard cap, so a call that could cross it is not made. Unknown (a model without
    prices), only a budget already spent stops the call.
    """
    b, u = scope.budget, scope.usage
    if tool_call:
        if b.max_tool_calls is not None and u.tool_calls + 1 > b.max_tool_calls:
            raise BudgetExceeded("max_tool_calls", u.tool_calls, b.max_tool_calls)
        return
    if b.max_tokens is not None and u.total_tokens >= b.max_tokens:
        raise BudgetExceeded("max_tokens", u.total_tokens, b.max_tokens)
    if b.max_tokens is not None and u.total_tokens + next_input_tokens + MIN_ANSWER_TOKENS > b.max_tokens:
        # The prompt alone would leave too little for an answer (see ``completion_cap``).
        raise BudgetExceeded("max_tokens", u.total_tokens + next_input_tokens, b.max_tokens)
    if b.max_cost_usd is not None and u.cost_usd >= b.max_cost_usd:
        raise BudgetExceeded("max_cost_usd", round(u.cost_usd, 6), b.max_cost_usd)
    if b.max_cost_usd is not None and next_cost is not None and u.cost_usd + next_cost > b.max_cost_usd:
        raise BudgetExceeded("max_cost_usd", round(u.cost_usd, 6), b.max_cost_usd, next_call=round(next_cost, 6))
    if b.max_input_tokens is not None and u.prompt_tokens + next_input_tokens > b.max_input_tokens:
        raise BudgetExceeded("max_input_tokens", u.prompt_tokens + next_input_tokens, b.max_input_tokens)


def completion_cap(scopes: list[BudgetScope], next_input_tokens: int) -> int | None:
    """The most tokens the next answer may take without passing any scope's ``max_tokens``.

    The budget is checked before each call, so without a cap one long answer could overshoot it
    by up to the model's whole output. The prompt is estimated; ``check_budget`` has already
    stopped a call it would leave fewer than ``MIN_ANSWER_TOKENS``.
    """
    left = [
        s.budget.max_tokens - s.usage.total_tokens - next_input_tokens
        for s in scopes
        if s.budget.max_tokens is not None
    ]
    return max(MIN_ANSWER_TOKENS, min(left)) if left else None


def estimate_tokens(request: LLMRequest) -> int:
    """A cheap upper-ish estimate (4 characters a token) used only for the input-token budget."""
    chars = sum(len(str(m.get("content") or "")) for m in request.messages)
    return chars // 4 + 1


def max_completion_tokens(request: LLMRequest, cap: int | None = None) -> int:
    """The most tokens the answer to ``request`` may take: the least of the request's cap, the
    token budget's ``cap`` and the LLM's own ``max_tokens`` / ``max_completion_tokens`` param
    (the gateway sends the least of them), else its purpose's default cap; and never more than
    the LLM's context window leaves after the prompt (``window_room``)."""
    params = request.llm.params
    caps: list[int] = [
        n for n in (request.max_tokens, cap, params.get("max_tokens"), params.get("max_completion_tokens"))
        if isinstance(n, int) and not isinstance(n, bool) and n > 0
    ]
    wanted = min(caps) if caps else PURPOSE_MAX_COMPLETION_TOKENS.get(request.purpose, DEFAULT_MAX_COMPLETION_TOKENS)
    return min(wanted, window_room(request))


def window_room(request: LLMRequest) -> int:
    """The answer tokens the LLM's context window leaves after the prompt, less a margin for the
    estimate (``estimate_prompt_tokens`` counts 4 characters a token; a tokenizer may count more):
    vLLM and OpenAI refuse a request whose prompt plus ``max_tokens`` exceeds the window. Never
    below ``MIN_ANSWER_TOKENS``: a prompt that fills the window fails as a context overflow.
    """
    prompt = estimate_prompt_tokens(request)
    margin = WINDOW_MARGIN_TOKENS + prompt // 8
    return max(MIN_ANSWER_TOKENS, request.llm.context_window - prompt - margin)


def estimate_prompt_tokens(request: LLMRequest) -> int:
    """The prompt's tokens for pricing it before the call: 4 characters a token, rounded up,
    counting what ``estimate_tokens`` leaves out (tool calls in the messages, the tools' schemas).

    A tokenizer would count closer but costs a whole encoding of the prompt on every call.
    """
    chars = 0
    for message in request.messages:
        chars += len(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            chars += len(json.dumps(call, ensure_ascii=False))
    if request.tools:
        chars += len(json.dumps(request.tools, ensure_ascii=False))
    return -(-chars // 4)


# A UTF-16 surrogate alone: JSON may carry one ("\ud800"), UTF-8 cannot, so neither can the
# database (PostgreSQL), a page or a socket. A pair arrives from JSON as one code point.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with any lone surrogate as U+FFFD: what a model writes is stored and shown."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def _unencodable_out(response: LLMResponse) -> None:
    response.content = encodable(response.content)
    for call in response.tool_calls:
        call.name, call.arguments = encodable(call.name), encodable(call.arguments)


class DeltaBatcher:
    """A streamed answer's ``llm.delta`` events, a few chunks at a time (issue #20).

    A chunk is a token or two; an event per chunk is a database row, a socket frame and a page
    update each. Text is held until it reaches ``MAX_CHARS`` or ``MAX_WAIT`` seconds have passed
    since the last event; held text goes out ``MAX_WAIT`` after it came even if nothing follows
    (a model pausing, or writing a tool call), and the rest when the answer ends (``flush``): the
    first token still shows at once, and the events add up to the answer.
    """

    MAX_CHARS = 64
    MAX_WAIT = 0.05

    __slots__ = ("_emit", "_step_id", "_now", "_parts", "_size", "_last", "_held_at", "_timer", "_lock")

    def __init__(self, emit: Any, step_id: str | None, clock: Clock) -> None:
        self._emit, self._step_id, self._now = emit, step_id, clock.monotonic
        self._parts: list[str] = []
        self._size = 0
        self._last = self._now()
        self._held_at = 0.0  # the loop's time when the text held now began to be held
        self._timer: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()  # a timer's flush and the next chunk's keep their order

    async def __call__(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        now = self._now()
        if self._size >= self.MAX_CHARS or now - self._last >= self.MAX_WAIT:
            await self.flush(now)
        elif len(self._parts) == 1:  # the first text held since the last event
            loop = asyncio.get_running_loop()
            self._held_at = loop.time()
            if self._timer is None:
                self._timer = loop.call_later(self.MAX_WAIT, self._on_timer)

    def _on_timer(self) -> None:
        """Send the held text once it has waited ``MAX_WAIT``. One timer serves a call's batches:
        an event sent meanwhile leaves it armed, and it waits on for text held after it, rather
        than a timer made and cancelled per event (issue #20)."""
        self._timer = None
        if not self._parts:
            return
        loop = asyncio.get_running_loop()
        wait = self._held_at + self.MAX_WAIT - loop.time()
        if wait > 0:
            self._timer = loop.call_later(wait, self._on_timer)
        else:
            asyncio.ensure_future(self.flush())

    async def flush(self, now: float | None = None) -> None:
        async with self._lock:
            if not self._parts:
                return
            text = encodable("".join(self._parts))
            self._parts.clear()
            self._size = 0
            self._last = self._now() if now is None else now
            await self._emit("llm.delta", {"text": text}, step_id=self._step_id)

    def close(self) -> None:
        """No timer left behind: a call that ended (or was stopped) emits nothing later."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


@dataclass
class LLMCaller:
    gateway: Gateway
    emit: EventEmitter
    cancel: CancelToken
    clock: Clock
    usage: Usage
    limiters: RateLimiters
    budget: Budget = field(default_factory=Budget)
    backoff_base: float = 0.5
    backoff_cap: float = 20.0
    # Requests-per-minute limits besides the LLM's own: the crew's and the calling agent's
    # ``max_rpm``, as (limiter key, rpm). Every call waits for a slot in each of them.
    rpm_limits: tuple[tuple[str, int], ...] = ()
    # Whether anyone follows this run's ``llm.delta`` events right now: a request that asks for
    # deltas (``LLMRequest.stream``) emits them only then. The request itself streams either way
    # (see ``_streaming``). ``None`` (plain engine use): always emit them.
    stream_gate: Callable[[], bool] | None = None
    # The request forms each LLM refused (tools, json_schema, ...): learned once, never resent.
    capabilities: Capabilities = field(default_factory=Capabilities)

    def with_emitter(self, emit: EventEmitter) -> LLMCaller:
        return dataclasses.replace(self, emit=emit)

    def with_rpm(self, key: str, rpm: int | None) -> LLMCaller:
        """This caller with one more requests-per-minute limit (``None`` adds nothing)."""
        if not rpm:
            return self
        return dataclasses.replace(self, rpm_limits=(*self.rpm_limits, (key, rpm)))

    def scopes(self, extra: BudgetScope | None) -> list[BudgetScope]:
        found = [BudgetScope(self.budget, self.usage, "crew")]
        if extra is not None:
            found.append(extra)
        return found

    async def check(self, extra: BudgetScope | None = None, *, next_input_tokens: int = 0,
                    next_cost: float | None = None, tool_call: bool = False) -> None:
        """Raise ``BudgetExceeded`` (after emitting ``budget.exceeded``) if a scope is spent, or
        the next call (``next_cost``, its worst case) could pass a scope's cost budget."""
        for scope in self.scopes(extra):
            try:
                check_budget(scope, next_input_tokens=next_input_tokens, next_cost=next_cost, tool_call=tool_call)
            except BudgetExceeded as exc:
                data: dict[str, Any] = {"limit": exc.limit, "used": exc.used, "allowed": exc.allowed}
                if exc.next_call is not None:
                    data["next_call_usd"] = exc.next_call
                await self.emit("budget.exceeded", data)
                raise

    async def worst_cost(self, request: LLMRequest, extra: BudgetScope | None, input_tokens: int) -> float | None:
        """The most ``request`` could cost in US dollars: its prompt and its longest answer
        (``max_completion_tokens``) at the LLM's prices, or the gateway's (``prices``) for an LLM
        without its own. None when no scope has a cost budget or the price is unknown. The call
        is then sent with that answer length as its cap, so the worst case priced is a bound."""
        scopes = self.scopes(extra)
        if all(s.budget.max_cost_usd is None for s in scopes):
            return None  # nothing to price it for
        llm = request.llm
        if llm.input_price_per_1k is not None or llm.output_price_per_1k is not None:
            prices: tuple[float, float] | None = (
                (llm.input_price_per_1k or 0.0) / 1000, (llm.output_price_per_1k or 0.0) / 1000)
        else:
            lookup = getattr(self.gateway, "prices", None)  # optional: ``llm.PriceList``
            prices = await lookup(llm) if lookup is not None else None
        if prices is None:
            return None
        answer = max_completion_tokens(request, completion_cap(scopes, input_tokens))
        return estimate_prompt_tokens(request) * prices[0] + answer * prices[1]

    async def call(
        self,
        request: LLMRequest,
        *,
        step_id: str | None = None,
        scope: BudgetScope | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> LLMResponse:
        """Send ``request`` once, retrying retryable errors up to ``llm.max_retries`` times.

        Each attempt's ``llm.completed`` or ``llm.failed`` carries what it sent and got back
        (``Event.call``) when the sink keeps LLM calls; else no record is built. The ``LLMError``
        it raises has ``retries_spent`` set: no layer above retries the call again. A provider
        that refuses to stream is asked again unstreamed at once (not an attempt of its own).
        """
        llm = request.llm
        keep = self.emit.keeps_llm_calls
        attempts = llm.max_retries + 1
        limiters = [
            (key, limiter)
            for key, rpm in ((llm.key, llm.rpm), *self.rpm_limits)
            if (limiter := self.limiters.get(key, rpm)) is not None
        ]
        attempt = 0
        unstreamed = False  # asked again unstreamed after a refusal to stream (learned once it works)
        while attempt < attempts:
            attempt += 1
            self.cancel.raise_if_cancelled()
            input_tokens = estimate_tokens(request)
            priced = await self.worst_cost(request, scope, input_tokens)
            await self.check(scope, next_input_tokens=input_tokens, next_cost=priced)
            for key, limiter in limiters:
                await limiter.acquire(self.cancel, self._waiting(request, key, limiter.rpm, step_id))
            self.cancel.raise_if_cancelled()
            await self.emit("llm.started", {"model": llm.model, "purpose": request.purpose}, step_id=step_id)
            started = self.clock.monotonic()
            stream, delta_cb = self._streaming(request, on_delta, step_id, unstreamed=unstreamed)
            # The answer's length as the budgets priced it (a token budget's remainder, the longest
            # answer a cost budget's worst case counted), else its purpose's default cap.
            cap = completion_cap(self.scopes(scope), input_tokens)
            sent = dataclasses.replace(request, stream=stream, max_tokens=max_completion_tokens(request, cap))
            try:
                try:
                    response = await self.cancel.race(self.gateway.complete(sent, on_delta=delta_cb))
                except LLMError:
                    if isinstance(delta_cb, DeltaBatcher):
                        await delta_cb.flush()  # what was heard before the failure
                    raise
                finally:
                    if isinstance(delta_cb, DeltaBatcher):
                        delta_cb.close()  # stopped or failed: no timer fires after the call
                if isinstance(delta_cb, DeltaBatcher):
                    await delta_cb.flush()
            except RetryableLLMError as exc:
                # A host that did not take the connection is given up at once: it is down or the
                # address is wrong, and retrying would hold a run for max_retries connect timeouts.
                retrying = attempt < attempts and exc.kind != UNREACHABLE
                delay = exc.retry_after if exc.retry_after is not None else self.backoff_base * (2 ** (attempt - 1))
                delay = min(delay, self.backoff_cap)
                lost: dict[str, Any] = {"model": llm.model, "purpose": request.purpose, "error": str(exc),
                                        "retrying": retrying, "attempt": attempt, "kind": exc.kind}
                if retrying:  # what the run waits for now: retry ``attempt`` of ``max_retries``, in ``retry_in`` s
                    lost.update(retry_in=round(delay, 1), max_retries=llm.max_retries)
                await self.emit(
                    "llm.failed", lost,
                    step_id=step_id, call=call_record(sent, error=str(exc)) if keep else None,
                )
                if not retrying:
                    self.cancel.raise_if_cancelled()  # a call that failed while stopping: a stop
                    exc.retries_spent = True
                    raise
                await self.cancel.race(self.clock.sleep(delay))
                continue
            except LLMError as exc:
                again = isinstance(exc, FormUnsupportedError) and exc.form == STREAM and sent.stream
                failed: dict[str, Any] = {
                    "model": llm.model, "purpose": request.purpose, "error": str(exc), "retrying": again, "attempt": attempt,
                    "kind": exc.kind,
                }
                if isinstance(exc, FormUnsupportedError):
                    # A refused form: the caller asks again in a simpler one (a downgrade, not a failure).
                    failed["negotiated"] = True
                await self.emit(
                    "llm.failed", failed,
                    step_id=step_id, call=call_record(sent, error=str(exc)) if keep else None,
                )
                self.cancel.raise_if_cancelled()  # a call that failed while stopping: a stop
                if again:
                    # Asked again unstreamed at once; learned when that works (a broken proxy's
                    # truncated body reads as "not an event stream" too, and fails unstreamed).
                    unstreamed = True
                    attempt -= 1
                    continue
                exc.retries_spent = True
                raise
            if unstreamed:
                # Learned: ``_streaming`` sends this LLM's requests unstreamed from now on.
                await self.capabilities.learn(llm, STREAM)
            _unencodable_out(response)
            latency_ms = response.latency_ms or int((self.clock.monotonic() - started) * 1000)
            response.latency_ms = latency_ms
            cost = response.cost_usd or 0.0
            for s in self.scopes(scope):
                s.usage.prompt_tokens += response.prompt_tokens
                s.usage.completion_tokens += response.completion_tokens
                s.usage.cost_usd += cost
                s.usage.llm_calls += 1
            await self.emit(
                "llm.completed",
                {
                    "model": llm.model,
                    "purpose": request.purpose,
                    "prompt_tokens": response.prompt_tokens,
                    "completion_tokens": response.completion_tokens,
                    "cost_usd": response.cost_usd,
                    "latency_ms": latency_ms,
                },
                step_id=step_id, call=call_record(sent, response) if keep else None,
            )
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _waiting(self, request: LLMRequest, key: str, rpm: int, step_id: str | None) -> Callable[[float], Awaitable[None]]:
        """What a wait for a slot of the limiter ``key`` says: ``llm.waiting``, with whose limit
        it is (the model's own, the calling agent's or the crew's) and how long it lasts."""
        whose = "model" if key == request.llm.key else "agent" if key.startswith("agent:") else "crew"

        async def say(seconds: float) -> None:
            await self.emit("llm.waiting", {
                "model": request.llm.model, "purpose": request.purpose, "reason": "rate_limit",
                "seconds": round(seconds, 1), "limit": whose, "rpm": rpm,
            }, step_id=step_id)

        return say

    def _streaming(
        self, request: LLMRequest, on_delta: DeltaCallback | None, step_id: str | None,
        *, unstreamed: bool = False,
    ) -> tuple[bool, DeltaCallback | None]:
        """Whether the request is sent streamed, and who hears its deltas.

        Every request to an LLM that can stream is streamed, whether or not anyone reads its
        deltas: cancelling a streamed call closes its connection, which is what makes a local
        server (llama.cpp, Ollama) stop generating; an unstreamed one keeps it busy to the end.
        Deltas go to the caller's callback, else, for a request that asks for them
        (``LLMRequest.stream``), to ``llm.delta`` events while the gate says someone follows;
        else nowhere, so a call nobody watches does no work per chunk.

        Asked on every attempt, so a page opened during a run gets the next call's deltas.
        """
        llm = request.llm
        if unstreamed or not llm.stream or self.capabilities.refuses(llm, STREAM):
            return False, None
        if on_delta is None and request.stream and (self.stream_gate is None or self.stream_gate()):
            on_delta = self._delta_emitter(step_id)
        return True, on_delta

    async def aclose(self) -> None:
        """Close what the gateway keeps open for this event loop (its connections)."""
        close = getattr(self.gateway, "aclose", None)
        if close is not None:
            await close()

    def _delta_emitter(self, step_id: str | None) -> DeltaBatcher:
        return DeltaBatcher(self.emit, step_id, self.clock)

    async def count_tool_call(self, scope: BudgetScope | None = None) -> None:
        """Check the tool-call budgets, then count one tool call against every scope."""
        self.cancel.raise_if_cancelled()
        await self.check(scope, tool_call=True)
        for s in self.scopes(scope):
            s.usage.tool_calls += 1


def make_caller(gateway: Gateway, emit: EventEmitter, *, cancel: CancelToken, clock: Clock, usage: Usage,
                limiters: RateLimiters | None = None, budget: Budget | None = None, **kw: Any) -> LLMCaller:
    return LLMCaller(
        gateway=gateway, emit=emit, cancel=cancel, clock=clock, usage=usage,
        limiters=limiters or RateLimiters(clock), budget=budget or Budget(), **kw,
    )
