"""The tools side of a ReAct loop: a call's name matched and its arguments checked, then run
(with retries, usage caps, approval, the run's cache), several at once when they may be.

``ToolTurns`` is half of the loop in ``react`` (which holds the conversation and the LLM turns).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.prompts import PromptBook
from agents.engine.runtime import Cancelled, RunContext
from agents.engine.specs import AgentSpec, ToolRef
from agents.engine.tool_input import ToolInputError, match_tool_name, parse_tool_input
from agents.engine.tools import Tool, ToolError, ToolRegistry

TOOL_ATTEMPTS = 3  # a failing tool runs at most this many times per call (upstream's policy)
MAX_PARALLEL_TOOLS = 8
EVENT_TEXT_LIMIT = 4000  # tool output kept in an event; the model still sees all of it


@dataclass(slots=True)
class Prepared:
    """A tool call after name matching, argument parsing and validation."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    ref: ToolRef | None = None
    tool: Tool | None = None
    error: str | None = None  # the observation when the call cannot run
    repeat: bool = False


@dataclass(slots=True)
class ToolOutcome:
    observation: str
    ends_turn: bool = False  # a successful ``result_as_answer`` tool: the output is the answer


class ToolTurns:
    """Running the tool calls of a turn (``react._ReactRun`` provides the state they use)."""

    ctx: RunContext
    agent: AgentSpec
    scope: BudgetScope | None
    registry: ToolRegistry
    prompts: PromptBook
    refs: dict[str, ToolRef]
    tool_names: list[str]
    tools_used: list[str]
    usage_counts: dict[str, int]
    last_call: tuple[str, str] | None
    last_text: str
    step_id: str | None

    async def _emit(self, type_: str, data: dict[str, Any]) -> None:
        await self.ctx.emit(type_, data, step_id=self.step_id)

    async def _execute_batch(self, prepared: list[Prepared]) -> list[ToolOutcome]:
        """In parallel unless a call ends the turn or has a usage cap; results in call order."""
        sequential = len(prepared) == 1 or any(
            p.ref is not None and (p.ref.result_as_answer or p.ref.max_usage is not None)
            for p in prepared
        )
        if sequential:
            outcomes: list[ToolOutcome] = []
            for p in prepared:
                outcome = await self._execute(p)
                outcomes.append(outcome)
                if outcome.ends_turn:
                    break
            return outcomes
        limit = asyncio.Semaphore(MAX_PARALLEL_TOOLS)

        async def run_one(p: Prepared) -> ToolOutcome:
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

    def _prepare(self, raw_name: str, raw_args: str | dict[str, Any] | None) -> Prepared:
        name = match_tool_name(raw_name, self.tool_names) if self.tool_names else None
        if name is None:
            available = ", ".join(self.tool_names) or self.prompts.render("nothing")
            if raw_name.strip():
                error = self.prompts.render("tool_unknown", name=raw_name, tools=available)
            else:
                error = self.prompts.render("tool_unnamed", tools=available)
            return Prepared(name=raw_name, error=error)
        ref, tool = self.refs[name], self.registry.get(name)
        assert tool is not None  # refs only holds names the registry has
        try:
            args = self._parse_args(tool, raw_args)
            args = tool.validate(args)
        except ToolInputError as exc:
            schema = json.dumps(tool.args_schema)
            return Prepared(
                name=name,
                ref=ref,
                tool=tool,
                error=self.prompts.render("tool_invalid_args", name=name, error=exc, schema=schema),
            )
        key = (name, json.dumps(args, sort_keys=True, default=str))
        repeat = key == self.last_call
        self.last_call = key
        return Prepared(name=name, args=args, ref=ref, tool=tool, repeat=repeat)

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

    async def _execute(self, p: Prepared) -> ToolOutcome:
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

    def _observe(self, observation: str, *, ends_turn: bool = False) -> ToolOutcome:
        if not observation.strip():
            observation = self.prompts.render("tool_no_output")
        self.last_text = observation
        return ToolOutcome(observation=observation, ends_turn=ends_turn)

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


def _clip_args(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments for an event: long strings shortened (a person approving sees them whole)."""
    if all(not isinstance(v, str) or len(v) <= EVENT_TEXT_LIMIT for v in args.values()):
        return args
    return {k: _clip(v) if isinstance(v, str) else v for k, v in args.items()}


def _clip(text: str) -> str:
    if len(text) <= EVENT_TEXT_LIMIT:
        return text
    return text[:EVENT_TEXT_LIMIT] + f"… [{len(text) - EVENT_TEXT_LIMIT} more characters]"
