"""Drafting an agent's plan (ENGINE.md §2.1): the planner's prompts, its call (a ``create_plan``
tool call, or JSON in text when the model cannot call tools), refining while the planner says it
is not ready, and numbering and repairing the steps it gave. A part of ``planning.PlanAndAct``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agents.engine.calls import BudgetScope
from agents.engine.llm import LLMError, LLMRequest, Message
from agents.engine.plan_parsing import (
    PLAN_SCHEMA,
    PLAN_TOOL,
    PLAN_TOOL_NAME,
    DraftPlan,
    PlanStep,
    parse_plan_response,
    plan_as_text,
)
from agents.engine.prompts import PromptBook, PromptError, render
from agents.engine.runtime import RunContext
from agents.engine.specs import (
    PLAN_PROMPT_PLACEHOLDERS,
    REFINE_PROMPT_PLACEHOLDERS,
    LLMSpec,
    PlanningConfigSpec,
    TaskSpec,
    ToolRef,
)
from agents.engine.structured import Shape, ask_structured
from agents.engine.tool_input import match_tool_name


class Drafting:
    """Mixed into ``planning.PlanAndAct``: these are the parts of it that draft a plan."""

    # What it uses of PlanAndAct:
    ctx: RunContext
    task: TaskSpec
    config: PlanningConfigSpec
    scope: BudgetScope | None
    book: PromptBook
    plan_llm: LLMSpec
    steps: list[PlanStep]
    tools: dict[str, ToolRef]

    if TYPE_CHECKING:

        @property
        def persona(self) -> dict[str, str]: ...
        @property
        def description(self) -> str: ...
        def tools_text(self) -> str: ...
        async def emit(self, type_: str, data: dict[str, Any], *, step_id: str | None = None) -> None: ...
        async def warn(self, message: str) -> None: ...

    # -- the planner's prompts ----------------------------------------------------------------

    def system_message(self) -> Message:
        if self.config.system_prompt is not None:
            return {"role": "system", "content": self.config.system_prompt}
        return {"role": "system", "content": self.book.render("agent_plan_system", **self.persona)}

    def plan_message(self) -> Message:
        values = {
            **self.persona,
            "description": self.description,
            "expected_output": self.task.expected_output,
            "tools": self.tools_text(),
            "max_steps": self.config.max_steps,
        }
        if self.config.plan_prompt is not None:
            text = render(self.config.plan_prompt, _only(values, PLAN_PROMPT_PLACEHOLDERS))
        else:
            text = self.book.render("agent_plan", **values)
        return {"role": "user", "content": text}

    def refine_message(self, current_plan: str) -> Message:
        values = {**self.persona, "current_plan": current_plan, "max_steps": self.config.max_steps}
        if self.config.refine_prompt is not None:
            text = render(self.config.refine_prompt, _only(values, REFINE_PROMPT_PLACEHOLDERS))
        else:
            text = self.book.render("agent_refine", **values)
        return {"role": "user", "content": text}

    # -- the planner's calls ------------------------------------------------------------------

    async def call_planner(self, messages: list[Message], purpose: str) -> DraftPlan:
        """One planner request, its form negotiated with the LLM (``structured``): a
        ``create_plan`` tool call, a JSON schema, JSON mode, or JSON asked for in words."""
        shape = Shape(
            name=PLAN_TOOL_NAME,
            schema=PLAN_SCHEMA,
            description=PLAN_TOOL["function"]["description"],
            tool=True,
            instructions=self.book.render("agent_plan_json"),
        )
        request = LLMRequest(llm=self.plan_llm, messages=messages, purpose=purpose)
        answer = await ask_structured(self.ctx.llm, request, shape, scope=self.scope)
        return parse_plan_response(answer.response)

    async def make_plan(
        self, first: Message, *, purpose: str, replan: int = 0
    ) -> tuple[DraftPlan | None, list[PlanStep]]:
        """Plan, then refine while not ready, up to ``max_attempts_effective`` attempts in all.

        Returns the last draft (``None`` if the first call failed) and its repaired steps.
        """
        extra = {"replan": replan} if replan else {}
        system = self.system_message()
        attempt = 1
        await self.emit("agent_plan.started", {"attempt": attempt, **extra})
        try:
            draft = await self.call_planner([system, first], purpose)
        except LLMError as exc:
            await self.emit("agent_plan.failed", {"error": str(exc), "attempt": attempt, **extra})
            return None, []
        steps = await self.adopt(draft)
        await self.emit_completed(attempt, draft, steps, extra)
        limit = self.config.max_attempts_effective
        current = plan_as_text(draft, self.book)
        previous_steps = bool(draft.steps)
        while not draft.ready and attempt < limit:
            attempt += 1
            try:
                refine = self.refine_message(current)
            except PromptError as exc:
                await self.emit("agent_plan.failed", {"error": f"refine_prompt: {exc}", **extra})
                break
            await self.emit("agent_plan.started", {"attempt": attempt, **extra})
            # Only the latest draft is shown back: the conversation stays the same size per attempt.
            messages = [system, first, {"role": "assistant", "content": current}, refine]
            try:
                draft = await self.call_planner(messages, "refine")
            except LLMError as exc:
                await self.emit(
                    "agent_plan.failed", {"error": str(exc), "attempt": attempt, **extra}
                )
                break
            steps = await self.adopt(draft)
            await self.emit_completed(attempt, draft, steps, extra)
            previous, current = current, plan_as_text(draft, self.book)
            if not draft.ready and (current == previous or not (draft.steps or previous_steps)):
                # The same plan again, or prose without steps twice in a row: refining more
                # would only pay for the same answer (issue #14: 10 identical calls).
                await self.warn(
                    "refining stopped: the planner returned the same plan again"
                    if current == previous
                    else "refining stopped: the planner gave no steps twice in a row"
                )
                break
            previous_steps = bool(draft.steps)
        if not draft.ready:
            await self.warn(f"the plan is still not ready after {attempt} attempt(s)")
        return draft, steps

    async def emit_completed(
        self, attempt: int, draft: DraftPlan, steps: list[PlanStep], extra: dict[str, Any]
    ) -> None:
        await self.emit(
            "agent_plan.completed",
            {
                "attempt": attempt,
                "plan": draft.text,
                "ready": draft.ready,
                "steps": [s.as_data() for s in steps],
                **extra,
            },
        )

    async def adopt(self, draft: DraftPlan) -> list[PlanStep]:
        """Number, bound and repair a draft's steps (ours: upstream executes whatever it got).

        New steps are numbered after the highest number already used, so a replanned step never
        collides with a kept one. A dependency on an unknown step, on itself or on a later step
        (the only way to form a cycle) is dropped with a warning: the plan is repaired rather than
        refused, because every step still runs and the observer sees the failed ones.
        """
        first = max((s.number for s in self.steps), default=0) + 1
        kept = {s.number for s in self.steps if s.done}
        drafts = [s for s in draft.steps if s.description]
        if len(drafts) < len(draft.steps):
            await self.warn(
                f"dropped {len(draft.steps) - len(drafts)} step(s) without a description"
            )
        if len(drafts) > self.config.max_steps:
            await self.warn(
                f"the plan has {len(drafts)} steps; only the first {self.config.max_steps} "
                "(max_steps) are kept"
            )
            drafts = drafts[: self.config.max_steps]
        numbering: dict[int, int] = {}
        for offset, d in enumerate(drafts):
            numbering.setdefault(d.number, first + offset)
        adopted: list[PlanStep] = []
        for offset, d in enumerate(drafts):
            number = first + offset
            deps: list[int] = []
            for wanted in d.depends_on:
                # The new plan's own numbers win; otherwise a kept step may be meant.
                target = numbering.get(wanted, wanted if wanted in kept else None)
                if target is None:
                    await self.warn(f"step {number} depends on unknown step {wanted}: dropped")
                elif target >= number:
                    await self.warn(
                        f"step {number} depends on step {target}, which does not come before it "
                        "(a cycle or a forward reference): dropped"
                    )
                elif target not in deps:
                    deps.append(target)
            tool = self.known_tool(d.tool)
            if d.tool and tool is None:
                await self.warn(f"step {number} names tool {d.tool!r}, which the agent lacks")
            adopted.append(
                PlanStep(
                    id=f"{self.task.key}.s{number}",
                    number=number,
                    description=d.description,
                    tool=tool,
                    depends_on=tuple(deps),
                )
            )
        return adopted

    def known_tool(self, name: str | None) -> str | None:
        # The same matching as ReAct's: exact, then ignoring case and spacing, then similar.
        return match_tool_name(name, list(self.tools)) if name else None


def _only(values: Mapping[str, object], allowed: Iterable[str]) -> dict[str, object]:
    keep = set(allowed)
    return {k: v for k, v in values.items() if k in keep}
