"""An approved crew plan as the agent's plan (ENGINE.md §2b): its steps run as approved, and
``on_step_failure`` says what a failed step or a review may change (``continue``: nothing;
``ask``: a person approves new steps; ``adapt``: the agent adopts them), each change shown as a
deviation. A part of ``planning.PlanAndAct``; ``planning.run_approved_steps`` is its entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents.engine.calls import BudgetExceeded
from agents.engine.llm import Message
from agents.engine.plan_parsing import DraftPlan, Observation, PlanStep, result_block
from agents.engine.prompts import PromptBook, PromptError
from agents.engine.runtime import Cancelled, RunContext
from agents.engine.specs import PlanningConfigSpec, TaskSpec

if TYPE_CHECKING:
    from agents.engine.planning import Decision


class ApprovedPlan:
    """Mixed into ``planning.PlanAndAct``: these are the parts of it that keep to an approved plan."""

    # What it uses of PlanAndAct:
    ctx: RunContext
    task: TaskSpec
    config: PlanningConfigSpec
    book: PromptBook
    steps: list[PlanStep]
    replans: int

    if TYPE_CHECKING:

        @property
        def persona(self) -> dict[str, str]: ...
        @property
        def description(self) -> str: ...
        def tools_text(self) -> str: ...
        async def emit(self, type_: str, data: dict[str, Any], *, step_id: str | None = None) -> None: ...
        async def warn(self, message: str) -> None: ...
        async def make_plan(
            self, first: Message, *, purpose: str, replan: int = 0
        ) -> tuple[DraftPlan | None, list[PlanStep]]: ...
        async def execute(self) -> str: ...
        async def skip_unfinished(self, reason: str) -> None: ...
        async def answer(self) -> str: ...
        async def refine_pending(self, refinements: Sequence[Mapping[str, Any]], after: PlanStep) -> None: ...
        async def replace_pending(self, steps: list[PlanStep], reason: str) -> None: ...
        def observed_step(self, step: PlanStep, outcome: str) -> str: ...

    async def run_bound(self) -> str:
        """ENGINE.md §2b: the approved crew plan is the plan. No planning call is made; each
        approved step runs in order (ids = the plan's stable ids), seeing every earlier step's
        result, and ``on_step_failure`` says how far the agent may depart from it."""
        self.steps = [
            PlanStep(id=s.id, number=n, description=s.text, depends_on=tuple(range(1, n)))
            for n, s in enumerate(self.task.plan_steps, start=1)
        ]
        await self.emit(
            "agent_plan.bound",
            {
                "on_step_failure": self.task.on_step_failure,
                "steps": [s.as_data() for s in self.steps],
            },
        )
        try:
            stopped_because = await self.execute()
        except (Cancelled, BudgetExceeded) as exc:
            await self.skip_unfinished("cancelled" if isinstance(exc, Cancelled) else str(exc))
            raise
        await self.skip_unfinished(stopped_because)
        return await self.answer()

    async def decide_bound(self, step: PlanStep, seen: Observation, decision: Decision) -> None:
        """What a failed step or a review may change in an approved plan (ENGINE.md §2b).

        ``continue`` changes nothing: the approved steps all run, failures are marked. ``ask``
        and ``adapt`` want new steps for the rest when a step failed or the review asks for a
        new plan (``ask`` proposes them to a person, ``adapt`` adopts them); ``adapt`` also
        takes the review's refinements and its "goal achieved", each shown as a deviation.
        """
        policy = self.task.on_step_failure
        if policy == "continue" or decision.goal_achieved:
            return
        if not seen.success or seen.needs_replan:
            if decision.replan_reason is None:
                decision.replan_reason = (
                    seen.replan_reason or f"step {step.number} did not complete successfully"
                )
            return
        if policy != "adapt":
            return
        if seen.goal_achieved:
            decision.goal_achieved = True
        elif seen.refinements:
            before = [s.description for s in self.steps if s.status == "pending"]
            await self.refine_pending(seen.refinements, step)
            after = [s.description for s in self.steps if s.status == "pending"]
            if after != before:
                await self.deviated(f"refined after step {step.number}", before, after)

    async def deviated(
        self, reason: str, before: list[str], after: list[str], *, approved: bool = False,
        steps: Sequence[PlanStep] = (), extra: Mapping[str, Any] | None = None,
    ) -> None:
        """The run departs from the approved plan; the page shows it as a diff, and ``steps``
        (the new ones, with their ids) in the plan it follows."""
        await self.emit(
            "crew_plan.deviated",
            {
                "reason": reason, "before": before, "after": after, "approved_by_person": approved,
                "steps": [s.as_data() for s in steps], **(extra or {}),
            },
        )

    async def propose_steps(self, reason: str) -> list[PlanStep] | None:
        """A new plan for the remaining work (the replan prompt), not yet adopted."""
        self.replans += 1
        kept = [s for s in self.steps if s.done]
        await self.emit(
            "agent_plan.replanned",
            {
                "reason": reason,
                "count": self.replans,
                "kept_steps": sum(1 for s in kept if s.status == "completed"),
                "kept_step_ids": [s.id for s in kept],
            },
        )
        completed = [s for s in kept if s.status == "completed"]
        failed = [s for s in kept if s.status == "failed"]
        book = self.book
        try:
            first: Message = {
                "role": "user",
                "content": self.book.render(
                    "replan",
                    **self.persona,
                    description=self.description,
                    expected_output=self.task.expected_output,
                    tools=self.tools_text(),
                    completed="\n\n".join(result_block(s, book) for s in completed)
                    or book.render("none"),
                    failed="\n\n".join(result_block(s, book) for s in failed)
                    or book.render("none"),
                    reason=reason,
                    max_steps=self.config.max_steps,
                ),
            }
        except PromptError as exc:
            await self.emit("agent_plan.failed", {"error": f"replan prompt: {exc}"})
            return None
        draft, steps = await self.make_plan(first, purpose="replan", replan=self.replans)
        if draft is None or not draft.ready or not steps:
            return None
        return steps

    async def ask_for_new_steps(self, reason: str) -> None:
        """``ask``: the agent proposes the remaining steps, a person edits and approves them
        (the run waits), and the steps approved replace the pending ones."""
        before = [s.description for s in self.steps if s.status == "pending"]
        proposed = await self.propose_steps(reason)
        texts = [s.description for s in proposed] if proposed else before
        if proposed is None:
            await self.warn("the agent proposed no usable steps: the remaining steps are proposed as they are")
        revision = await self.ctx.cancel.race(
            self.ctx.human.request_plan_change(
                task_key=self.task.key,
                reason=reason,
                # Only completed steps are kept: a failed one a person rewrites runs again.
                done_step_ids=[s.id for s in self.steps if s.status == "completed"],
                proposed=texts,
            )
        )
        for unused in proposed or ():  # the proposal was a suggestion: what runs is what was approved
            await self.emit(
                "step.skipped",
                {"step_id": unused.id, "number": unused.number, "reason": "not approved as proposed"},
                step_id=unused.id,
            )
        first = max([s.number for s in self.steps] + [s.number for s in proposed or ()], default=0) + 1
        done = tuple(s.number for s in self.steps if s.done)
        new = [
            PlanStep(id=a.id, number=first + i, description=a.text, depends_on=done + tuple(range(first, first + i)))
            for i, a in enumerate(revision.steps)
        ]
        await self.replace_pending(new, "replaced by the steps a person approved")
        await self.deviated(reason, before, [s.description for s in new], approved=True, steps=new,
                            extra=revision.data)
