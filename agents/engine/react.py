"""The ReAct executor: native tool calls or the Thought/Action/Observation text protocol.

The conversation a task starts with and the text protocol's parsing are in ``react_text`` (their
names are importable from here too), running the tools in ``react_tools``, and what keeps the
loop honest (turns, rejected replies, repeats) in ``react_turns``; this module is the loop.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any, Literal

from agents.engine.calls import BudgetScope
from agents.engine.capabilities import TOOLS
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
from agents.engine.react_tools import EVENT_TEXT_LIMIT, ToolTurns
from agents.engine.react_turns import (
    AnswerFormatError,
    Repeats,
    clip_reply,
    repeated_reason,
    reply_key,
)
from agents.engine.runtime import RunContext
from agents.engine.specs import AgentSpec, ToolRef

__all__ = [  # the text side is importable from here too (tests, the other engines, bench/)
    "EVENT_TEXT_LIMIT", "STOP_WORDS", "Action", "AnswerFormatError", "FinalAnswer", "FormatError",
    "ReactResult",
    "build_task_messages", "cut_at_observation", "parse_react", "run_react_loop", "task_description",
    "text_protocol_instructions", "to_text_protocol",
]

Outcome = Literal["completed", "iteration_exhausted", "timed_out", "failed"]

STOP_WORDS = ["\nObservation:"]
CONTEXT_FILL = 0.85  # share of the context window a summarising chunk may use


@dataclass
class ReactResult:
    output: str
    outcome: Outcome
    iterations: int  # LLM turns used
    tools_used: list[str]  # tool names actually executed, in order
    messages: list[Message]
    error: str | None = None  # why a ``failed`` loop ended, in plain words


# --- the loop -----------------------------------------------------------------------------------


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
    reading checked before every LLM call. An agent without tools gets no format: its first
    non-empty reply is the answer. With ``force_final_answer`` the turn after ``max_iter`` asks
    for the best answer without tools (``react.forced_answer`` says so); without it the loop
    stops with ``iteration_exhausted`` and the last text it has.

    The same reply ``REPEAT_LIMIT`` times in a row ends the loop early: ``failed`` with the reason,
    or (with ``force_final_answer``) one forced answer, and ``AnswerFormatError`` if that is no
    answer either.
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


class _ReactRun(ToolTurns):
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
        # Not when this LLM refused tools before (learned by the caller, ``Capabilities``).
        self.capabilities = getattr(ctx.llm, "capabilities", None)  # a plain caller has none
        refused = self.capabilities is not None and self.capabilities.refuses(agent.llm, TOOLS)
        self.native = agent.llm.supports_tools and bool(self.refs) and not refused
        self.schemas = self.registry.openai_schemas(self.tool_names) if self.native else None
        self.messages = list(messages)
        self.iterations = 0
        self.tools_used: list[str] = []
        self.usage_counts: dict[str, int] = {}
        self.last_call: tuple[str, str] | None = None
        self.last_text = ""
        self.summary: Message | None = None
        # No tools, no format: the reply is the answer (ours; upstream asks for "Final Answer:").
        self.plain = not self.refs
        self.repeats = Repeats()
        self.announced = 0  # the last turn a react.turn event announced
        if self.refs and not self.native and not self._has_text_protocol():
            self._add_text_protocol_to_system()

    # -- driving -----------------------------------------------------------------------------

    async def run(self) -> ReactResult:
        while True:
            if self.repeats.stuck:
                return await self._stop_repeating()
            if self.iterations >= self.max_iter:
                if not self.force_final_answer:
                    return self._result(self.last_text, "iteration_exhausted")
                if self._past_deadline():
                    return self._result(self.last_text, "timed_out")
                return await self._forced_final_answer("max_turns")
            if self._past_deadline():
                return self._result(self.last_text, "timed_out")
            await self._announce_turn()
            try:
                stop = None if self.native or self.plain else STOP_WORDS
                response = await self._call(self.messages, tools=self.schemas, stop=stop)
            except ToolsUnsupportedError:
                if not self.native:
                    raise
                if self.capabilities is not None:
                    await self.capabilities.learn(self.llm, TOOLS)  # the next loop sends none
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

    def _result(self, output: str, outcome: Outcome, *, error: str | None = None) -> ReactResult:
        return ReactResult(
            output=output,
            outcome=outcome,
            iterations=self.iterations,
            tools_used=self.tools_used,
            messages=self.messages,
            error=error,
        )

    async def _announce_turn(self) -> None:
        """``react.turn``: the page's "turn N of M" (a turn retried after a downgrade is one)."""
        self.ctx.cancel.raise_if_cancelled()  # a stopped run announces no turn it will not take
        turn = self.iterations + 1
        if self.plain or turn == self.announced:
            return
        self.announced = turn
        await self._emit("react.turn", {"turn": turn, "max_turns": self.max_iter})

    async def _stop_repeating(self) -> ReactResult:
        """The model sent the same reply ``REPEAT_LIMIT`` times: more turns would not change it."""
        reason = repeated_reason(self.repeats.count)
        await self._emit(
            "react.stuck",
            {
                "turn": self.iterations,
                "max_turns": self.max_iter,
                "repeats": self.repeats.count,
                "reason": reason,
                **clip_reply(self.repeats.reply),
            },
        )
        if not self.force_final_answer:
            return self._result(self.last_text, "failed", error=reason)
        if self._past_deadline():
            return self._result(self.last_text, "timed_out")
        return await self._forced_final_answer("repeated", failure=reason)

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

    async def _forced_final_answer(
        self, reason: Literal["max_turns", "repeated"], *, failure: str = ""
    ) -> ReactResult:
        """One call without tools; its text is the answer whatever its format, except that after
        a loop that repeated itself another tool call is no answer (``AnswerFormatError``)."""
        forced: Message = {"role": "user", "content": self.prompts.render("forced_final_answer")}
        stop = None if self.plain else STOP_WORDS
        try:
            # Native tool messages are flattened: a request without tools may not carry them.
            response = await self._call(
                [*to_text_protocol(self.messages), forced], tools=None, stop=stop
            )
        except ContextLengthError as exc:
            if not await self._shrink_context(exc):
                return self._result(self.last_text, "timed_out")
            response = await self._call([*self.messages, forced], tools=None, stop=stop)
        self.messages.append(forced)
        self.iterations += 1
        text = cut_at_observation(response.content or "").strip()
        parsed = parse_react(text)
        answer = parsed.answer if isinstance(parsed, FinalAnswer) else text
        if text:
            self.messages.append({"role": "assistant", "content": text})
        if reason == "repeated":
            if not answer or isinstance(parsed, Action):
                await self._reject(text, failure)
                raise AnswerFormatError(failure)
        elif not answer:
            answer = self.last_text
        if not answer:
            raise LLMError("the model returned no final answer")
        await self._emit(
            "react.forced_answer",
            {"reason": reason, "turn": self.iterations, "max_turns": self.max_iter},
        )
        return self._result(answer, "completed")

    async def _reject(self, text: str, error: str) -> None:
        """``react.format_error``: a reply that was neither an answer nor a usable action."""
        await self._emit(
            "react.format_error",
            {"turn": self.iterations, "max_turns": self.max_iter, "error": error, **clip_reply(text)},
        )

    # -- handling replies --------------------------------------------------------------------

    async def _handle_text(self, content: str) -> str | None:
        if self.plain:
            return await self._handle_plain(content.strip())
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
            self.repeats.see(reply_key(text, action=(parsed.tool, parsed.tool_input)), text)
            self.messages.append({"role": "assistant", "content": text})
            prepared = self._prepare(parsed.tool, parsed.tool_input)
            outcome = await self._execute(prepared)
            self.messages.append({"role": "user", "content": f"Observation: {outcome.observation}"})
            return outcome.observation if outcome.ends_turn else None
        self.repeats.see(reply_key(text), text)
        if text:
            self.messages.append({"role": "assistant", "content": text})
            self.last_text = text
        error = self.prompts.render(parsed.key if text else "format_error_empty")
        await self._reject(text, error)
        self.messages.append(
            {
                "role": "user",
                "content": self.prompts.render(
                    "format_error", error=error, tool_names=", ".join(self.tool_names)
                ),
            }
        )
        return None

    async def _handle_plain(self, text: str) -> str | None:
        """No tools: the reply is the answer ("Final Answer:" dropped if the model wrote it)."""
        parsed = parse_react(text)
        answer = parsed.answer if isinstance(parsed, FinalAnswer) and parsed.answer else text
        if answer:
            self.messages.append({"role": "assistant", "content": text})
            return answer
        self.repeats.see(reply_key(text), text)
        error = self.prompts.render("format_error_empty")
        await self._reject(text, error)
        self.messages.append({"role": "user", "content": error})
        return None

    async def _handle_native_calls(self, response: LLMResponse) -> str | None:
        calls = [
            ToolCall(id=c.id or f"call_{self.iterations}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(response.tool_calls)
        ]
        made = [(c.name, c.arguments) for c in calls]
        shown = "\n".join(f"{c.name}({c.arguments})" for c in calls)
        self.repeats.see(reply_key("", calls=made), shown)
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
