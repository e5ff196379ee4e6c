"""How a run asks a person (crews' ``HumanInterface``): a request row, the run waiting for the
answer, polling for it. The worker's side: it calls the run services (``crews.runs``), so it
lives beside the worker, not in the bridge that the services use."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async

from agents.engine.runtime import ApprovalDecision, Cancelled, CancelToken, PlanRevision
from agents.engine.specs import ApprovedStep
from crews import plans, runs
from crews.models import FeedbackRequest, Plan, ToolApproval
from crews.plans import approved_step_id
from crews.sink import run_hop

POLL_SECONDS = 0.25  # how often a waiting run looks for a person's answer or a stop request


def _approved_uid(task_key: str, step_id: str) -> int | None:
    """The plan step uid behind an approved step's id (``<task>.p<uid>``); None for others."""
    prefix = f"{task_key}.p"
    tail = step_id[len(prefix):] if step_id.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


class DatabaseHuman:
    """HumanInterface for runs: a request row, the run waiting for you, polling for the answer."""

    def __init__(self, run_id: int, cancel: CancelToken) -> None:
        self.run_id = run_id
        self.cancel = cancel

    async def request_feedback(self, *, task_key: str, answer: str) -> str:
        request = await run_hop(runs.run_wait_for_feedback)(run_id=self.run_id, task_key=task_key, answer=answer)
        row = await self._wait(lambda: FeedbackRequest.objects.filter(
            pk=request.pk, status=FeedbackRequest.Status.ANSWERED).first())
        await run_hop(runs.run_resume_after_person)(run_id=self.run_id)
        return row.text

    async def request_approval(self, *, approval_id: str, tool: str, args: dict[str, Any]) -> ApprovalDecision:
        await run_hop(runs.run_wait_for_approval)(
            run_id=self.run_id, approval_id=approval_id, tool=tool, args=args)
        row = await self._wait(lambda: ToolApproval.objects.filter(
            run_id=self.run_id, approval_id=approval_id).exclude(status=ToolApproval.Status.PENDING).first())
        await run_hop(runs.run_resume_after_person)(run_id=self.run_id)
        return ApprovalDecision(approve=row.status == ToolApproval.Status.APPROVED, note=row.note)

    async def request_plan_change(
        self, *, task_key: str, reason: str, done_step_ids: Sequence[str], proposed: Sequence[str]
    ) -> PlanRevision:
        """The proposal becomes a version of the run's own plan; the run waits until a person
        approves it (in the editor or the API), then goes on with the steps approved for the
        task, less those it completed (unless the person changed one: it runs again)."""
        task_id = int(task_key)
        keep = [int(uid) for uid in (_approved_uid(task_key, s) for s in done_step_ids) if uid is not None]
        propose = run_hop(runs.run_propose_plan_change)
        while (asked := await propose(run_id=self.run_id, task_id=task_id, keep_uids=keep,
                                      texts=list(proposed), reason=reason)) is None:
            # The run waits for a person already (another task's question): this one waits its turn.
            self.cancel.raise_if_cancelled()
            await self.cancel.race(asyncio.sleep(POLL_SECONDS))
        plan, departed = asked
        proposed_version = plan.version
        approved = await self._wait(lambda: Plan.objects.filter(
            pk=plan.pk, status=Plan.Status.APPROVED, approved_version__gte=proposed_version).first())
        if not await run_hop(runs.run_resume_with_plan)(run_id=self.run_id, plan=approved):
            raise Cancelled("the run no longer waits for this plan")
        number = approved.approved_version
        read = sync_to_async(plans.steps_by_task_key)
        before = {s.id: s.text for s in (await read(plan, departed)).get(task_key, [])}
        steps = (await read(approved, number)).get(task_key, [])
        kept = {approved_step_id(task_id, uid) for uid in keep}
        remaining = [
            s if s.id not in kept else ApprovedStep(id=f"{s.id}.v{number}", text=s.text)  # edited: again
            for s in steps if s.id not in kept or before.get(s.id) != s.text
        ]
        return PlanRevision(remaining, {"plan_id": plan.pk, "version": number, "from_version": departed})

    async def _wait(self, fetch: Any) -> Any:
        find = sync_to_async(fetch)
        while True:
            self.cancel.raise_if_cancelled()
            found = await find()
            if found is not None:
                return found
            try:
                await self.cancel.race(asyncio.sleep(POLL_SECONDS))
            except Cancelled:
                raise
