"""The ReAct executor: native tool calls or the Thought/Action/Observation text protocol.

The conversation a task starts with and the text protocol's parsing are in ``react_text`` (their
names are importable from here too); this module is the loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.llm import (
    ContextLengthError,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    ToolCall,
    ToolsUnsupportedError,
)
from agents.engine.react_text import (
    Action,
    FinalAnswer,
    FormatError,
    build_task_messages,
    cut_at_observation,
    parse_react,
    prompts_for,
    registry_for,
    task_description,
    text_protocol_instructions,
    to_text_protocol,
)
from agents.engine.runtime import Cancelled, RunContext
from agents.engine.specs import AgentSpec, ToolRef
from agents.engine.tool_input import ToolInputError, match_tool_name, parse_tool_input
from agents.engine.tools import Tool, ToolError

__all__ = [  # the text side is importable from here too (tests, the other engines, bench/)
    "EVENT_TEXT_LIMIT", "STOP_WORDS", "Action", "FinalAnswer", "FormatError", "ReactResult",
    "build_task_messages", "cut_at_observation", "parse_react", "run_react_loop", "task_description",
    "text_protocol_instructions", "to_text_protocol",
]

Outcome = Literal["completed", "iteration_exhausted", "timed_out"]

STOP_WORDS = ["\nObservation:"]
TOOL_ATTEMPTS = 3  # a failing tool runs at most this many times per call (upstream's policy)
MAX_PARALLEL_TOOLS = 8
CONTEXT_FILL = 0.85  # share of the context window a summarising chunk may use
EVENT_TEXT_LIMIT = 4000  # tool output kept in an event; the model still sees all of it


@dataclass
class ReactResult:
    output: str
    outcome: Outcome
    iterations: int  # LLM turns used
    tools_used: list[str]  # tool names actually executed, in order
    messages: list[Message]



# --- the loop -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Prepared:
    """A tool call after name matching, argument parsing and validation."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    ref: ToolRef | None = None
    tool: Tool | None = None
    error: str | None = None  # the observation when the call cannot run
    repeat: bool = False


@dataclass(slots=True)
class _Outcome:
    observation: str
    ends_turn: bool = False  # a successful ``result_as_answer`` tool: the output is the answer


async def run_react_loop(
    ctx: RunContext,
    agent: AgentSpec,
    messages: list[Message],
    *,
    max_iter: int,
    purpose: str = "react",
    step_id: str | None = None,
    scope: BudgetScope | None = None,
    deadline: float | None = None,
    force_final_answer: bool = True,
) -> ReactResult:
    """Run the conversation until a final answer, ``max_iter`` turns, or ``deadline``.

    ``messages`` (system + user) is copied, not changed. ``deadline`` is a ``ctx.clock``
    reading checked before every LLM call. With ``force_final_answer`` the turn after
    ``max_iter`` asks for the best answer without tools; without it the loop stops with
    ``iteration_exhausted`` and the last text it has.
    """
    run = _ReactRun(
        ctx,
        agent,
        messages,
        max_iter=max_iter,
        purpose=purpose,
        step_id=step_id,
        scope=scope,
        deadline=deadline,
        force_final_answer=force_final_answer,
    )
    return await run.run()


class _ReactRun:
    def __init__(
        self,
        ctx: RunContext,
        agent: AgentSpec,
        messages: list[Message],
        *,
        max_iter: int,
        purpose: str,
        step_id: str | None,
        scope: BudgetScope | None,
        deadline: float | None,
        force_final_answer: bool,
    ) -> None:
        self.ctx = ctx
        self.agent = agent
        self.llm = agent.llm
        self.max_iter = max_iter
        self.purpose = purpose
        self.step_id = step_id
        self.scope = scope
        self.deadline = deadline
        self.force_final_answer = force_final_answer
        self.registry = registry_for(ctx)
        self.prompts = prompts_for(ctx)
        self.refs: dict[str, ToolRef] = {r.name: r for r in agent.tools if r.name in self.registry}
        self.tool_names = list(self.refs)
        self.native = agent.llm.supports_tools and bool(self.refs)
        self.schemas = self.registry.openai_schemas(self.tool_names) if self.native else None
        self.messages = list(messages)
        self.iterations = 0
        self.tools_used: list[str] = []
        self.usage_counts: dict[str, int] = {}
        self.last_call: tuple[str, str] | None = None
        self.last_text = ""
        self.summary: Message | None = None
        if self.refs and not self.native and not self._has_text_protocol():
            self._add_text_protocol_to_system()

    # -- driving -----------------------------------------------------------------------------

    async def run(self) -> ReactResult:
        while True:
            if self.iterations >= self.max_iter:
                if not self.force_final_answer:
                    return self._result(self.last_text, "iteration_exhausted")
                if self._past_deadline():
                    return self._result(self.last_text, "timed_out")
                return await self._forced_final_answer()
            if self._past_deadline():
                return self._result(self.last_text, "timed_out")
            try:
                response = await self._call(
                    self.messages, tools=self.schemas, stop=None if self.native else STOP_WORDS
                )
            except ToolsUnsupportedError:
                if not self.native:
                    raise
                self._downgrade()
                continue
            except ContextLengthError as exc:
                self.iterations += 1  # as upstream: a recovery uses up a turn, so it cannot loop
                if not await self._shrink_context(exc):
                    return self._result(self.last_text, "timed_out")
                continue
            self.iterations += 1
            if self.native and response.tool_calls:
                answer = await self._handle_native_calls(response)
            else:
                answer = await self._handle_text(response.content or "")
            if answer is not None:
                return self._result(answer, "completed")

    def _result(self, output: str, outcome: Outcome) -> ReactResult:
        return ReactResult(
            output=output,
            outcome=outcome,
            iterations=self.iterations,
            tools_used=self.tools_used,
            messages=self.messages,
        )

    def _past_deadline(self) -> bool:
        return self.deadline is not None and self.ctx.clock.monotonic() >= self.deadline

    async def _call(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None,
        stop: list[str] | None = None,
        stream: bool | None = None,
    ) -> LLMResponse:
        self.ctx.cancel.raise_if_cancelled()
        request = LLMRequest(
            llm=self.llm,
            # A shallow copy: the request must not change as the conversation grows.
            messages=list(messages),
            purpose=self.purpose,
            tools=tools,
            stop=stop,
            stream=self.llm.stream if stream is None else stream,
        )
        response: LLMResponse = await self.ctx.llm.call(
            request, step_id=self.step_id, scope=self.scope
        )
        return response

    async def _forced_final_answer(self) -> ReactResult:
        """One call without tools; its text is the answer whatever its format."""
        forced: Message = {"role": "user", "content": self.prompts.render("forced_final_answer")}
        try:
            # Native tool messages are flattened: a request without tools may not carry them.
            response = await self._call(
                [*to_text_protocol(self.messages), forced], tools=None, stop=STOP_WORDS
            )
        except ContextLengthError as exc:
            if not await self._shrink_context(exc):
                return self._result(self.last_text, "timed_out")
            response = await self._call([*self.messages, forced], tools=None, stop=STOP_WORDS)
        self.messages.append(forced)
        self.iterations += 1
        text = cut_at_observation(response.content or "").strip()
        parsed = parse_react(text)
        answer = parsed.answer if isinstance(parsed, FinalAnswer) else text
        if text:
            self.messages.append({"role": "assistant", "content": text})
        if not answer:
            answer = self.last_text
        if not answer:
            raise LLMError("the model returned no final answer")
        return self._result(answer, "completed")

    # -- handling replies --------------------------------------------------------------------

    async def _handle_text(self, content: str) -> str | None:
        text = cut_at_observation(content).strip()
        parsed = parse_react(text)
        if isinstance(parsed, FinalAnswer):
            self.messages.append({"role": "assistant", "content": text})
            return parsed.answer
        if self.native and text and isinstance(parsed, FormatError):
            # With native tools, a reply without tool calls is the answer (the API's contract).
            self.messages.append({"role": "assistant", "content": text})
            return text
        if isinstance(parsed, Action):
            self.messages.append({"role": "assistant", "content": text})
            prepared = self._prepare(parsed.tool, parsed.tool_input)
            outcome = await self._execute(prepared)
            self.messages.append({"role": "user", "content": f"Observation: {outcome.observation}"})
            return outcome.observation if outcome.ends_turn else None
        if text:
            self.messages.append({"role": "assistant", "content": text})
            self.last_text = text
        error = self.prompts.render(parsed.key if text else "format_error_empty")
        self.messages.append(
            {
                "role": "user",
                "content": self.prompts.render(
                    "format_error", error=error, tool_names=", ".join(self.tool_names)
                ),
            }
        )
        return None

    async def _handle_native_calls(self, response: LLMResponse) -> str | None:
        calls = [
            ToolCall(id=c.id or f"call_{self.iterations}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(response.tool_calls)
        ]
        self.messages.append(
            {
                "role": "assistant",
                "content": response.content or None,
                "tool_calls": [c.as_message_part() for c in calls],
            }
        )
        prepared = [self._prepare(c.name, c.arguments) for c in calls]
        outcomes = await self._execute_batch(prepared)
        answer: str | None = None
        for call, outcome in zip(calls, outcomes, strict=False):
            self.messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": outcome.observation}
            )
            if outcome.ends_turn and answer is None:
                answer = outcome.observation
        for call in calls[len(outcomes) :]:
            # Every call needs a tool message, or the conversation is invalid if it continues.
            not_run = self.prompts.render("tool_not_run")
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": not_run})
        return answer

    async def _execute_batch(self, prepared: list[_Prepared]) -> list[_Outcome]:
        """In parallel unless a call ends the turn or has a usage cap; results in call order."""
        sequential = len(prepared) == 1 or any(
            p.ref is not None and (p.ref.result_as_answer or p.ref.max_usage is not None)
            for p in prepared
        )
        if sequential:
            outcomes: list[_Outcome] = []
            for p in prepared:
                outcome = await self._execute(p)
                outcomes.append(outcome)
                if outcome.ends_turn:
                    break
            return outcomes
        limit = asyncio.Semaphore(MAX_PARALLEL_TOOLS)

        async def run_one(p: _Prepared) -> _Outcome:
            async with limit:
                return await self._execute(p)

        tasks = [asyncio.ensure_future(run_one(p)) for p in prepared]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    # -- tools -------------------------------------------------------------------------------

    def _prepare(self, raw_name: str, raw_args: str | dict[str, Any] | None) -> _Prepared:
        name = match_tool_name(raw_name, self.tool_names) if self.tool_names else None
        if name is None:
            available = ", ".join(self.tool_names) or self.prompts.render("nothing")
            if raw_name.strip():
                error = self.prompts.render("tool_unknown", name=raw_name, tools=available)
            else:
                error = self.prompts.render("tool_unnamed", tools=available)
            return _Prepared(name=raw_name, error=error)
        ref, tool = self.refs[name], self.registry.get(name)
        assert tool is not None  # refs only holds names the registry has
        try:
            args = self._parse_args(tool, raw_args)
            args = tool.validate(args)
        except ToolInputError as exc:
            schema = json.dumps(tool.args_schema)
            return _Prepared(
                name=name,
                ref=ref,
                tool=tool,
                error=self.prompts.render("tool_invalid_args", name=name, error=exc, schema=schema),
            )
        key = (name, json.dumps(args, sort_keys=True, default=str))
        repeat = key == self.last_call
        self.last_call = key
        return _Prepared(name=name, args=args, ref=ref, tool=tool, repeat=repeat)

    @staticmethod
    def _parse_args(tool: Tool, raw: str | dict[str, Any] | None) -> dict[str, Any]:
        try:
            return parse_tool_input(raw)
        except ToolInputError:
            # "Action Input: 2 + 2" for a tool with one argument: the text is that argument.
            props = list(tool.properties)
            if isinstance(raw, str) and len(props) == 1 and not raw.lstrip().startswith("{"):
                return {props[0]: raw.strip().strip("\"'")}
            raise

    async def _emit(self, type_: str, data: dict[str, Any]) -> None:
        await self.ctx.emit(type_, data, step_id=self.step_id)

    async def _execute(self, p: _Prepared) -> _Outcome:
        if p.error is not None:
            await self._emit("tool.failed", {"name": p.name, "error": p.error})
            return self._observe(p.error)
        if p.repeat:
            return self._observe(self.prompts.render("tool_repeated", name=p.name))
        assert p.ref is not None and p.tool is not None
        ref, tool = p.ref, p.tool
        if ref.max_usage is not None and self.usage_counts.get(p.name, 0) >= ref.max_usage:
            error = self.prompts.render("tool_usage_limit", name=p.name, max_usage=ref.max_usage)
            await self._emit("tool.failed", {"name": p.name, "error": error})
            return self._observe(error)
        if ref.needs_approval:
            denial = await self._ask_approval(p.name, p.args)
            if denial is not None:
                return self._observe(denial)
        if ref.max_usage is not None:
            self.usage_counts[p.name] = self.usage_counts.get(p.name, 0) + 1
        # A call a person approves may have side effects: it is never served from the cache.
        cacheable = self.agent.cache_tools and tool.cacheable and not ref.needs_approval
        cache_key = (p.name, json.dumps(p.args, sort_keys=True, default=str))
        if cacheable and cache_key in self.ctx.tool_cache:
            self.ctx.cancel.raise_if_cancelled()
            output = self.ctx.tool_cache[cache_key]
            self.tools_used.append(p.name)
            await self._emit("tool.started", {"name": p.name, "args": _clip_args(p.args)})
            await self._emit(
                "tool.completed",
                {"name": p.name, "output": _clip(output), "from_cache": True},
            )
            return self._observe(output, ends_turn=ref.result_as_answer)
        await self.ctx.llm.count_tool_call(self.scope)
        self.tools_used.append(p.name)
        await self._emit("tool.started", {"name": p.name, "args": _clip_args(p.args)})
        error, attempts = "", 0
        for attempts in range(1, TOOL_ATTEMPTS + 1):  # noqa: B007 - reported after the loop
            self.ctx.cancel.raise_if_cancelled()
            try:
                output = await self.ctx.cancel.race(tool.invoke(p.args))
            except (Cancelled, BudgetExceeded):
                raise
            except ToolError as exc:
                error = str(exc)
                if not exc.retryable:
                    break
            except Exception as exc:  # noqa: BLE001 - a tool's bug must not end the run
                error = f"{type(exc).__name__}: {exc}"
                # An error that says it is final (a delegated agent that already used its own
                # retries, say) is not worth running the tool again.
                if getattr(exc, "retryable", True) is False:
                    break
            else:
                if cacheable:
                    self.ctx.tool_cache[cache_key] = output
                await self._emit(
                    "tool.completed",
                    {"name": p.name, "output": _clip(output), "from_cache": False},
                )
                return self._observe(output, ends_turn=ref.result_as_answer)
        await self._emit("tool.failed", {"name": p.name, "error": error, "attempts": attempts})
        if attempts > 1:
            return self._observe(
                self.prompts.render(
                    "tool_failed_retried", name=p.name, attempts=attempts, error=error
                )
            )
        return self._observe(self.prompts.render("tool_failed", name=p.name, error=error))

    def _observe(self, observation: str, *, ends_turn: bool = False) -> _Outcome:
        if not observation.strip():
            observation = self.prompts.render("tool_no_output")
        self.last_text = observation
        return _Outcome(observation=observation, ends_turn=ends_turn)

    async def _ask_approval(self, name: str, args: dict[str, Any]) -> str | None:
        """Wait for a person; ``None`` when approved, else the observation for the agent."""
        self.ctx.cancel.raise_if_cancelled()
        approval_id = uuid.uuid4().hex
        await self._emit(
            "approval.requested", {"approval_id": approval_id, "tool": name, "args": args}
        )
        decision = await self.ctx.cancel.race(
            self.ctx.human.request_approval(approval_id=approval_id, tool=name, args=args)
        )
        await self._emit(
            "approval.resolved",
            {"approval_id": approval_id, "approve": decision.approve, "note": decision.note},
        )
        if decision.approve:
            return None
        if decision.note:
            return self.prompts.render("tool_denied_note", name=name, note=decision.note)
        return self.prompts.render("tool_denied", name=name)

    # -- text protocol and context window ----------------------------------------------------

    def _has_text_protocol(self) -> bool:
        return any(
            "Action Input" in str(m.get("content") or "")
            for m in self.messages
            if m.get("role") in ("system", "user")
        )

    def _instructions(self) -> str:
        return text_protocol_instructions(self.agent, self.registry, self.prompts, self.tool_names)

    def _add_text_protocol_to_system(self) -> None:
        # A caller's own prompt (a plan step, say) may not explain the protocol the model must use.
        if self.messages and self.messages[0].get("role") == "system":
            first = self.messages[0]
            content = f"{first.get('content') or ''}\n\n{self._instructions()}".strip()
            self.messages[0] = {**first, "content": content}
        else:
            self.messages.insert(0, {"role": "system", "content": self._instructions()})

    def _downgrade(self) -> None:
        """The provider refused tools: same conversation, text protocol from here on."""
        self.native = False
        self.schemas = None
        self.messages = to_text_protocol(self.messages)
        if not self._has_text_protocol():
            self.messages.append({"role": "user", "content": self._instructions()})

    async def _shrink_context(self, exc: ContextLengthError) -> bool:
        """Summarise everything after the task; ``False`` if the deadline passed first."""
        if not self.agent.respect_context_window:
            raise ContextLengthError(
                f"The conversation no longer fits the context window of {self.llm.model} and "
                f"the agent does not summarise it (respect_context_window is off): {exc}"
            ) from exc
        keep: list[Message] = []
        rest: list[Message] = []
        task_seen = False
        for message in self.messages:
            role = message.get("role")
            if role == "system" or (role == "user" and not task_seen):
                keep.append(message)
                task_seen = task_seen or role == "user"
            else:
                rest.append(message)
        if not rest or rest == [self.summary]:
            raise ContextLengthError(
                f"The task itself does not fit the context window of {self.llm.model}: {exc}"
            ) from exc
        chunks = self._chunks(rest)
        if self._past_deadline():
            return False
        requests = [
            self._call(
                [{"role": "user", "content": self.prompts.render("summarize", text=chunk)}],
                tools=None,
                stream=False,
            )
            for chunk in chunks
        ]
        responses = await asyncio.gather(*requests)
        summaries = [_strip_summary_tags(r.content or "") for r in responses]
        self.summary = {
            "role": "user",
            "content": "<summary>\n" + "\n\n".join(s for s in summaries if s) + "\n</summary>",
        }
        self.messages = [*keep, self.summary]
        return True

    def _chunks(self, messages: list[Message]) -> list[str]:
        """Messages as text, in chunks that each fit 85% of the window (4 characters a token)."""
        overhead = len(self.prompts.render("summarize", text=""))
        limit = max(500, int(self.llm.context_window * CONTEXT_FILL) * 4 - overhead)
        entries: list[str] = []
        for message in to_text_protocol(messages):
            text = f"{message.get('role')}: {message.get('content') or ''}"
            if len(text) <= limit:
                entries.append(text)
                continue
            size = limit - 20  # room for the part label
            count = -(-len(text) // size)
            entries.extend(
                f"[Part {i + 1}/{count}] {text[i * size : (i + 1) * size]}" for i in range(count)
            )
        chunks: list[str] = []
        current = ""
        for entry in entries:
            if current and len(current) + 2 + len(entry) > limit:
                chunks.append(current)
                current = ""
            current = f"{current}\n\n{entry}" if current else entry
        if current:
            chunks.append(current)
        return chunks


def _strip_summary_tags(text: str) -> str:
    text = text.strip()
    match = re.search(r"<summary>(.*?)</summary>", text, re.DOTALL)
    return match.group(1).strip() if match else text


def _clip_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments for an event: long strings shortened (a person approving sees them whole)."""
    if all(not isinstance(v, str) or len(v) <= EVENT_TEXT_LIMIT for v in args.values()):
        return args
    return {k: _clip(v) if isinstance(v, str) else v for k, v in args.items()}


def _clip(text: str) -> str:
    if len(text) <= EVENT_TEXT_LIMIT:
        return text
    return text[:EVENT_TEXT_LIMIT] + f"… [{len(text) - EVENT_TEXT_LIMIT} more characters]"
