"""manage.py kickoff CREW --input k=v ...: run a crew in the foreground and show it as it goes.

The command is the run's worker: the run is created without being queued (``enqueue=False``) and
executed in this process, so no ``db_worker`` is needed and no worker can take it as well.
Progress (task, step, tool, tokens, cost) goes to stderr as the run's events are stored; the final
output goes to stdout, so ``manage.py kickoff ... > report.md`` keeps just the answer.

Exit status: 0 succeeded, 1 failed (or could not start), 130 stopped (Ctrl-C or from the page).
Ctrl-C stops the run cleanly (as the Stop button does); a second Ctrl-C stops waiting for it.
SIGTERM leaves the run interrupted, so it can be resumed.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import NoReverseMatch, reverse

from crews import plans, runner, runs, selectors
from crews.models import Crew, Plan, Run, RunEvent
from planner_site.errors import DomainError
from planner_site.roles import can_build
from planner_site.worker import run_stop_hooks

POLL_SECONDS = 0.2  # how often new events are read while the run works
EXIT_FAILED = 1
EXIT_STOPPED = 130  # what a shell reports for a program ended by Ctrl-C
_CLIP = 160


def parse_input(text: str) -> tuple[str, Any]:
    """``name=value``; the value is JSON when it parses as JSON (``n=3``, ``x=[1]``), else text."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise CommandError(f"--input takes name=value, not {text!r}.")
    try:
        return name, json.loads(raw)
    except ValueError:
        return name, raw


def _clip(value: Any, limit: int = _CLIP) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _page_of(run: Run) -> str:
    try:
        return reverse("crews:run-detail", args=[run.pk])
    except NoReverseMatch:
        return f"the page of run {run.pk}"


def _validation_message(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)


class Progress:
    """Turns stored run events into progress lines, keeping the run's token and cost totals."""

    def __init__(self, write: Callable[[str], None], *, run: Run) -> None:
        self.write = write
        tasks = run.snapshot.get("tasks", [])
        self.task_count = len(tasks)
        self.task_names = {t["id"]: t["name"] for t in tasks}
        self.page = _page_of(run)
        self.tokens = 0
        self.cost = Decimal(0)
        self.calls = 0

    def totals(self) -> str:
        return f"{self.tokens:,} tokens, ${self.cost:.4f}, {self.calls} LLM call{'s' * (self.calls != 1)}"

    def show(self, event: RunEvent) -> None:
        data = event.data or {}
        kind = event.type
        if kind == "llm.completed":
            tokens = int(data.get("prompt_tokens") or 0) + int(data.get("completion_tokens") or 0)
            self.tokens += tokens
            self.cost += Decimal(str(data.get("cost_usd") or 0))
            self.calls += 1
            self.write(f"      llm {data.get('purpose')}: {tokens:,} tokens (run so far: {self.totals()})")
        elif kind == "task.started":
            number = data.get("number") or "?"
            name = self.task_names.get(event.task_id, "")
            self.write(f"-> task {number}/{self.task_count} {name} ({data.get('agent', '')})")
        elif kind == "task.completed":
            self.write(f"   task done: {_clip(data.get('output', ''), 100)}")
        elif kind == "task.failed":
            self.write(f"   task failed: {_clip(data.get('error', ''))}")
        elif kind == "step.started":
            self.write(f"   step {data.get('number', '')}: {_clip(data.get('description', ''), 100)}")
        elif kind == "step.completed":
            self.write(f"   step {data.get('outcome', 'done')}")
        elif kind == "tool.started":
            self.write(f"   tool {data.get('name')} {_clip(json.dumps(data.get('args', {})), 100)}")
        elif kind == "tool.failed":
            self.write(f"   tool {data.get('name')} failed: {_clip(data.get('error', ''))}")
        elif kind == "run.planning":
            self.write("-> drafting the crew plan")
        elif kind == "crew_plan.approved":
            self.write(f"   using plan {data.get('plan_id')} v{data.get('version')}")
        elif kind == "crew_plan.warning":
            self.write(f"   warning: {_clip(data.get('message', ''))}")
        elif kind == "budget.exceeded":
            self.write(f"   budget exceeded: {data.get('limit')} used {data.get('used')}")
        elif kind == "run.awaiting_approval":
            self.write(f"   waiting for someone to approve plan {data.get('plan_id')} at {self.page}")
        elif kind == "run.awaiting_input":
            what = "approve a tool call" if data.get("kind") == "approval" else "give feedback"
            self.write(f"   waiting for someone to {what} at {self.page}")
        elif kind == "run.cancelling":
            self.write("   stopping…")


class Command(BaseCommand):
    help = "Run a crew in the foreground, showing its progress, and print its output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("crew", help="The crew's id or name.")
        parser.add_argument(
            "--input", dest="inputs", action="append", default=[], metavar="NAME=VALUE",
            help="An input; the value is read as JSON when it is JSON, else as text. Repeatable.",
        )
        parser.add_argument(
            "--plan", default=None, metavar="ID|auto|none",
            help="An approved plan's id; 'auto' drafts and approves one first; 'none' runs "
                 "without a plan. Default: as the crew says.",
        )
        parser.add_argument(
            "--user", default=None,
            help="Who runs it (default: the crew's owner). Must be allowed to see the crew.",
        )
        parser.add_argument(
            "--no-review", action="store_true",
            help="Do not pause for plan approval even if the crew asks for it.",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        self._interrupts = 0  # Ctrl-C presses
        self._cancel_sent = False
        self._terminating = False
        user, crew = self._crew_and_user(opts["crew"], opts["user"])
        inputs = dict(parse_input(text) for text in opts["inputs"])
        plan, planning = self._plan_option(opts["plan"], user=user, crew=crew, inputs=inputs)
        try:
            run = runs.run_kickoff(
                actor=user, crew=crew, inputs=inputs, plan=plan, planning=planning,
                review_plan=False if opts["no_review"] else None, enqueue=False,
            )
        except ValidationError as exc:
            raise CommandError(_validation_message(exc)) from None
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.progress(f'Run {run.pk} of crew "{crew.name}" ({crew.pk}) as {user.username}')
        self._follow(run)

    # Arguments ----------------------------------------------------------------------------

    def _crew_and_user(self, ref: str, username: str | None) -> tuple[Any, Crew]:
        user = None
        if username:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"No user named {username!r}.")
        candidates = Crew.objects.select_related("owner")
        if user is not None:
            candidates = selectors.crew_visible(user=user)
        if ref.isdigit():
            crew = candidates.filter(pk=int(ref)).first()
        else:
            found = list(candidates.filter(name=ref))
            if user is not None and len(found) > 1:
                found = [c for c in found if c.owner_id == user.pk] or found
            if len(found) > 1:
                raise CommandError(f"Several crews are named {ref!r}: give the id, or --user.")
            crew = found[0] if found else None
        if crew is None:
            raise CommandError(f"No crew {ref!r}" + (f" that {user.username} can see." if user else "."))
        user = user or crew.owner
        if not can_build(user):
            raise CommandError(f"{user.username}'s role cannot run crews.")
        return user, crew

    def _plan_option(self, value: str | None, *, user: Any, crew: Crew,
                     inputs: dict[str, Any]) -> tuple[Plan | None, bool | None]:
        if value is None:
            return None, None
        if value == "none":
            return None, False
        if value == "auto":
            return self._draft_plan(user=user, crew=crew, inputs=inputs), None
        if not value.isdigit():
            raise CommandError("--plan takes an approved plan's id, 'auto' or 'none'.")
        try:
            return selectors.plan_get(user=user, plan_id=int(value)), None
        except DomainError as exc:
            raise CommandError(exc.detail) from None

    def _draft_plan(self, *, user: Any, crew: Crew, inputs: dict[str, Any]) -> Plan:
        try:
            plan = plans.plan_draft(actor=user, crew=crew, inputs=inputs, enqueue=False)
        except ValidationError as exc:
            raise CommandError(_validation_message(exc)) from None
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.progress(f"Drafting plan {plan.pk} for {crew.name}…")
        try:
            runner.generate_plan(plan.pk)
        except KeyboardInterrupt:
            plans.plan_fail(plan_id=plan.pk, error="Drafting was stopped.")
            raise CommandError("Stopped while drafting the plan.", returncode=EXIT_STOPPED) from None
        plan.refresh_from_db()
        if plan.status != Plan.Status.DRAFT:
            raise CommandError(f"The plan could not be drafted: {plan.error or plan.status}")
        plan = plans.plan_approve(actor=user, plan=plan)
        tasks = {t.pk: t.name for t in crew.tasks.all()}
        for task_id, steps in plans.current_steps(plan).items():
            self.progress(f"   {tasks.get(task_id, task_id)}:")
            for number, step in enumerate(steps, start=1):
                self.progress(f"     {number}. {_clip(step.text, 120)}")
        self.progress(f"Approved plan {plan.pk} v{plan.approved_version}.")
        return plan

    # Following the run --------------------------------------------------------------------

    def progress(self, line: str) -> None:
        self.stderr.write(line, style_func=lambda text: text)

    def _follow(self, run: Run) -> None:
        finished = threading.Event()
        errors: list[BaseException] = []

        def work() -> None:
            try:
                runner.execute(run.pk)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)
            finally:
                finished.set()

        shown = Progress(self.progress, run=run)
        last = 0
        restore = self._install_signals()
        thread = threading.Thread(target=work, name=f"run-{run.pk}", daemon=True)
        thread.start()
        try:
            while True:
                done = finished.is_set()  # read before the events, so none is missed at the end
                for event in selectors.run_events(run=run, after=last):
                    shown.show(event)
                    last = event.seq
                self._handle_signals(run)
                if done:
                    break
                finished.wait(POLL_SECONDS)
        except KeyboardInterrupt:
            raise CommandError(
                f"Stopped waiting; run {run.pk} is still winding down.", returncode=EXIT_STOPPED
            ) from None
        finally:
            restore()
        thread.join()
        if errors:
            raise CommandError(f"Run {run.pk} stopped because of an internal error: {errors[0]}")
        self._report(Run.objects.get(pk=run.pk), shown)

    def _report(self, run: Run, shown: Progress) -> None:
        self.progress(f"Run {run.pk} {run.status}: {shown.totals()}")
        if run.status == Run.Status.SUCCEEDED:
            self.stdout.write(run.output)
            return
        if run.status == Run.Status.CANCELLED:
            raise CommandError(f"Run {run.pk} was stopped.", returncode=EXIT_STOPPED)
        if run.status == Run.Status.INTERRUPTED:
            raise CommandError(f"Run {run.pk} was interrupted; it can be resumed.", returncode=EXIT_FAILED)
        reason = run.error or f"it ended {run.get_status_display().lower()}"
        raise CommandError(f"Run {run.pk} failed: {reason}", returncode=EXIT_FAILED)

    def _install_signals(self) -> Callable[[], None]:
        """Ctrl-C and SIGTERM only set flags here; the main loop acts on them between reads."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def on_interrupt(signum: int, frame: Any) -> None:
            self._interrupts += 1
            if self._interrupts > 1:
                raise KeyboardInterrupt  # a second Ctrl-C: stop waiting for the run to wind down

        def on_terminate(signum: int, frame: Any) -> None:
            self._terminating = True

        previous = (signal.signal(signal.SIGINT, on_interrupt), signal.signal(signal.SIGTERM, on_terminate))

        def restore() -> None:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])

        return restore

    def _handle_signals(self, run: Run) -> None:
        if self._interrupts and not self._cancel_sent:
            self._cancel_sent = True
            self.progress("Stopping the run (Ctrl-C again to stop waiting)…")
            with contextlib.suppress(DomainError):  # it finished meanwhile
                runs.run_cancel(actor=run.created_by, run=run)
        elif self._terminating:
            self._terminating = False
            self.progress("Leaving the run interrupted; it can be resumed.")
            run_stop_hooks()  # the run's token: it ends as interrupted
