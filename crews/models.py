"""Data of the crews app: crews and tasks, plans with immutable versions, runs and their events."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from agents.models import LLM, Agent
from planner_site.stored_json import StoredJSONField


class OnStepFailure(models.TextChoices):
    """How far an agent may depart from an approved plan (ENGINE.md §2b)."""

    CONTINUE = "continue", _("Mark it failed and go on with the approved steps")
    ASK = "ask", _("Pause and ask me to approve the agent's new steps")
    ADAPT = "adapt", _("Let the agent replan the rest, and show me the changes")


class Crew(models.Model):
    class Process(models.TextChoices):
        SEQUENTIAL = "sequential", _("Sequential: tasks in order")
        HIERARCHICAL = "hierarchical", _("Hierarchical: a manager delegates")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("owner"), on_delete=models.CASCADE, related_name="crews"
    )
    name = models.CharField(_("name"), max_length=100)
    # Free texts have ceilings (issue #16): they go into prompts. Forms and the API read them.
    description = models.TextField(_("description"), blank=True, max_length=4_000)
    process = models.CharField(
        _("process"), max_length=20, choices=Process.choices, default=Process.SEQUENTIAL
    )
    manager_llm = models.ForeignKey(
        LLM, verbose_name=_("manager LLM"), null=True, blank=True, on_delete=models.PROTECT,
        related_name="+",
    )
    agents = models.ManyToManyField(Agent, verbose_name=_("agents"), related_name="crews", blank=True)
    planning = models.BooleanField(_("draft a plan before running"), default=False)
    planning_llm = models.ForeignKey(
        LLM, verbose_name=_("planning LLM"), null=True, blank=True, on_delete=models.PROTECT,
        related_name="+", help_text=_("Empty: the site default."),
    )
    review_plan = models.BooleanField(
        _("pause for plan approval"), default=False,
        help_text=_("When a run drafts its own plan, wait for someone to approve it."),
    )
    run_without_plan_on_failure = models.BooleanField(
        _("run without a plan if planning fails"), default=False
    )
    on_step_failure = models.CharField(
        _("when a step fails"), max_length=10, choices=OnStepFailure.choices, default=OnStepFailure.CONTINUE,
        help_text=_("What an agent may do when a step of the approved plan fails."),
    )
    memory = models.BooleanField(
        _("remember between runs"), default=False,
        help_text=_("After each task, save what was learned; before each task, recall what is relevant."),
    )
    max_rpm = models.PositiveIntegerField(
        _("max requests per minute"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    budget_max_tokens = models.PositiveIntegerField(
        _("token budget"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    budget_max_cost_usd = models.DecimalField(
        _("cost budget (USD)"), max_digits=10, decimal_places=4, null=True, blank=True,
        validators=[MinValueValidator(Decimal("0.0001"))],
    )
    default_inputs = StoredJSONField(_("default inputs"), default=dict, blank=True)
    shared = models.BooleanField(
        _("shared"), default=False, help_text=_("Everyone signed in can view it and its runs.")
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("crew")
        verbose_name_plural = _("crews")
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unique_crew_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    crew = models.ForeignKey(
        Crew, verbose_name=_("crew"), on_delete=models.CASCADE, related_name="tasks"
    )
    order = models.PositiveIntegerField(_("order"), default=0)
    name = models.CharField(_("name"), max_length=100)
    description = models.TextField(_("description"), max_length=20_000)
    expected_output = models.TextField(_("expected output"), max_length=8_000)
    agent = models.ForeignKey(
        Agent, verbose_name=_("agent"), null=True, blank=True, on_delete=models.SET_NULL,
        related_name="tasks",
    )
    context = models.ManyToManyField(
        "self", verbose_name=_("uses the output of"), symmetrical=False, blank=True,
        related_name="used_by",
    )
    async_execution = models.BooleanField(_("run alongside the next tasks"), default=False)
    human_input = models.BooleanField(_("ask a person to review the answer"), default=False)
    # What the answer must be (issue #18): a JSON schema, or None for free text.
    output_schema = StoredJSONField(_("output schema"), null=True, blank=True)
    # How the answer is checked before a later task takes it (API.md "Crews and tasks"):
    # {"criteria": [str], "min_chars": int, "max_chars": int, "must_contain": [str],
    #  "must_not_contain": [str], "pattern": str}; every key optional, {} = no checks.
    guardrails = StoredJSONField(_("checks"), default=dict, blank=True)
    guardrail_max_retries = models.PositiveSmallIntegerField(
        _("retries after a failed check"), default=3, validators=[MaxValueValidator(10)]
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        ordering = ["crew", "order", "id"]

    def __str__(self) -> str:
        return self.name


class Plan(models.Model):
    """A crew plan; every saved edit is a new immutable ``PlanVersion``."""

    class Status(models.TextChoices):
        GENERATING = "generating", _("Drafting")
        DRAFT = "draft", _("Draft")
        APPROVED = "approved", _("Approved")
        FAILED = "failed", _("Failed")
        SUPERSEDED = "superseded", _("Superseded")

    crew = models.ForeignKey(
        Crew, verbose_name=_("crew"), on_delete=models.CASCADE, related_name="plans"
    )
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.GENERATING
    )
    version = models.PositiveIntegerField(_("version"), default=0)  # the current version's number
    approved_version = models.PositiveIntegerField(_("approved version"), null=True, blank=True)
    inputs = StoredJSONField(_("inputs"), default=dict, blank=True)
    llm = models.ForeignKey(
        LLM, verbose_name=_("LLM"), null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), max_digits=12, decimal_places=6, default=Decimal(0)
    )
    error = models.TextField(_("error"), blank=True)
    next_step_uid = models.PositiveIntegerField(
        _("next step id"), default=1
    )  # step ids are stable across versions
    regenerating_task_ids = StoredJSONField(
        _("tasks being regenerated"), default=list, blank=True
    )  # tasks being re-drafted now
    # What the planner warned of when it drafted: [{"task_id": int | None, "message": str}]. The
    # editor shows a task's warnings while that task still has no usable steps.
    warnings = StoredJSONField(_("planner's warnings"), default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("created by"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("plan")
        verbose_name_plural = _("plans")
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return _("plan %(id)s v%(version)s of %(crew)s") % {"id": self.pk, "version": self.version, "crew": self.crew}


class PlanLLMCall(models.Model):
    """One LLM call of a plan drafted or regenerated outside a run ("Draft plan", the API), for
    usage and the daily budgets: a run's own calls are its ``llm.completed`` events, these have no
    run to hold them. Written with the plan's totals, which they add up to."""

    plan = models.ForeignKey(
        Plan, verbose_name=_("plan"), on_delete=models.CASCADE, related_name="llm_calls"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("person"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )  # who drafted or regenerated: whose budget it spends
    at = models.DateTimeField(_("at"), db_index=True)
    model = models.CharField(_("model"), max_length=200, blank=True)
    purpose = models.CharField(_("purpose"), max_length=50, blank=True)
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), max_digits=12, decimal_places=6, default=Decimal(0)
    )

    class Meta:
        verbose_name = _("plan LLM call")
        verbose_name_plural = _("plan LLM calls")
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.plan_id} {self.purpose} {self.model}"


class PlanVersion(models.Model):
    plan = models.ForeignKey(
        Plan, verbose_name=_("plan"), on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField(_("number"))
    note = models.CharField(
        _("note"), max_length=200, blank=True
    )  # "drafted", "edited", "restored v2", ...
    # The crew's tasks as this version was written for them (id, order, name, description,
    # expected_output, agent_id, as a run's snapshot has them): what a run compares its own
    # tasks with to say which changed since the plan was approved.
    tasks = StoredJSONField(_("tasks"), default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("created by"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("plan version")
        verbose_name_plural = _("plan versions")
        ordering = ["plan", "-number"]
        constraints = [models.UniqueConstraint(fields=["plan", "number"], name="unique_plan_version")]

    def __str__(self) -> str:
        return _("plan %(id)s v%(number)s") % {"id": self.plan_id, "number": self.number}


# Steps as a plan lists them: in their tasks' order (a deleted task's steps last), then their own.
PLAN_STEP_ORDER = (models.F("task__order").asc(nulls_last=True), "task_id_snapshot", "order")


class PlanStep(models.Model):
    """One step of one version. A version is immutable: deleting its task leaves the step (its
    ``task`` becomes null, ``task_id_snapshot`` still names it), so a run queued with an approved
    version still runs the steps a person approved."""

    version = models.ForeignKey(PlanVersion, on_delete=models.CASCADE, related_name="steps")
    uid = models.PositiveIntegerField()  # the step's stable id within its plan
    task = models.ForeignKey(Task, null=True, on_delete=models.SET_NULL, related_name="+")  # null: deleted
    task_id_snapshot = models.PositiveBigIntegerField()  # the Task id, kept when the task is deleted
    order = models.PositiveIntegerField()
    text = models.TextField()
    pinned = models.BooleanField(default=False)

    class Meta:
        verbose_name = _("plan step")
        verbose_name_plural = _("plan steps")
        ordering = ["version", *PLAN_STEP_ORDER]
        constraints = [models.UniqueConstraint(fields=["version", "uid"], name="unique_step_per_version")]

    def __str__(self) -> str:
        return self.text[:60]


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        PLANNING = "planning", _("Planning")
        AWAITING_APPROVAL = "awaiting_approval", _("Waiting for plan approval")
        RUNNING = "running", _("Running")
        AWAITING_INPUT = "awaiting_input", _("Waiting for you")
        CANCELLING = "cancelling", _("Stopping")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Stopped")
        INTERRUPTED = "interrupted", _("Interrupted")

    FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)
    ACTIVE = (Status.PLANNING, Status.RUNNING, Status.AWAITING_APPROVAL, Status.AWAITING_INPUT, Status.CANCELLING)

    crew = models.ForeignKey(
        Crew, verbose_name=_("crew"), null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    agent = models.ForeignKey(
        Agent, verbose_name=_("agent"), null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("created by"), on_delete=models.CASCADE, related_name="runs"
    )
    plan = models.ForeignKey(
        Plan, verbose_name=_("plan"), null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    plan_version = models.PositiveIntegerField(_("plan version"), null=True, blank=True)
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    inputs = StoredJSONField(_("inputs"), default=dict, blank=True)
    message = models.TextField(_("message"), blank=True)  # for an agent kicked off directly
    snapshot = StoredJSONField(
        _("snapshot"), default=dict, blank=True
    )  # the crew's definition at kickoff
    review_plan = models.BooleanField(_("review the plan"), default=False)
    output = models.TextField(_("output"), blank=True)
    error = models.TextField(_("error"), blank=True)
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), max_digits=12, decimal_places=6, default=Decimal(0)
    )
    llm_calls = models.PositiveIntegerField(_("LLM calls"), default=0)
    cancel_requested = models.BooleanField(_("stop requested"), default=False)
    last_seq = models.PositiveIntegerField(
        _("last event"), default=0
    )  # the newest RunEvent's seq (gapless from 1)
    planning_plan = models.ForeignKey(  # a plan this run drafted for itself
        Plan, verbose_name=_("plan drafted by the run"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="drafted_by_runs"
    )
    heartbeat_at = models.DateTimeField(_("heartbeat at"), null=True, blank=True)
    worker_id = models.CharField(_("worker"), max_length=100, blank=True)
    rerun_of = models.ForeignKey(
        "self", verbose_name=_("re-run of"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    start_from_task = models.PositiveIntegerField(
        _("start from task"), null=True, blank=True
    )  # a Task id
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["crew", "-created_at"]),
            # Every kickoff counts its starter's runs of the last minute (the rate limit), and the
            # run history filters by who started them: without it, all of that person's runs.
            models.Index(fields=["created_by", "created_at"]),
        ]

    def __str__(self) -> str:
        return _("run %(id)s (%(status)s)") % {"id": self.pk, "status": self.status}


# The states in which a worker owns a run (claimed, not ended or interrupted): only then may its
# engine store events, and only then may the run end.
RUN_WORKING = frozenset({
    Run.Status.PLANNING, Run.Status.RUNNING, Run.Status.AWAITING_APPROVAL, Run.Status.AWAITING_INPUT,
    Run.Status.CANCELLING,
})


class RunTask(models.Model):
    """One task's result within a run, with its usage roll-up."""

    class Status(models.TextChoices):
        WAITING = "waiting", _("Waiting")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")
        SKIPPED = "skipped", _("Skipped")

    run = models.ForeignKey(
        Run, verbose_name=_("run"), on_delete=models.CASCADE, related_name="task_results"
    )
    task_id_snapshot = models.PositiveBigIntegerField(_("task id"))  # the Task id at kickoff
    order = models.PositiveIntegerField(_("order"))
    name = models.CharField(_("name"), max_length=100)
    agent_name = models.CharField(_("agent name"), max_length=100, blank=True)
    status = models.CharField(
        _("status"), max_length=10, choices=Status.choices, default=Status.WAITING
    )
    output = models.TextField(_("output"), blank=True)
    output_json = StoredJSONField(_("output (JSON)"), null=True, blank=True)  # when the task has a schema
    error = models.TextField(_("error"), blank=True)
    prompt_tokens = models.PositiveIntegerField(_("prompt tokens"), default=0)
    completion_tokens = models.PositiveIntegerField(_("completion tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), max_digits=12, decimal_places=6, default=Decimal(0)
    )
    llm_calls = models.PositiveIntegerField(_("LLM calls"), default=0)

    class Meta:
        verbose_name = _("task result")
        verbose_name_plural = _("task results")
        ordering = ["run", "order"]
        constraints = [
            models.UniqueConstraint(fields=["run", "task_id_snapshot"], name="unique_task_per_run")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.name} ({self.status})"


class RunEvent(models.Model):
    run = models.ForeignKey(
        Run, verbose_name=_("run"), on_delete=models.CASCADE, related_name="events"
    )
    seq = models.PositiveIntegerField(_("sequence number"))  # gapless per run, from 1
    type = models.CharField(_("type"), max_length=50)
    task_id = models.PositiveBigIntegerField(_("task id"), null=True, blank=True)
    step_id = models.CharField(_("step id"), max_length=100, blank=True)
    data = StoredJSONField(_("data"), default=dict, blank=True)
    at = models.DateTimeField(_("at"))

    class Meta:
        verbose_name = _("run event")
        verbose_name_plural = _("run events")
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_event_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"


class RunLLMCall(models.Model):
    """What one LLM call of a run sent and got back, scrubbed of keys and secrets, so a person
    can check what the model was given (ENGINE.md §2b). Written with the call's ``llm.completed``
    or ``llm.failed`` event, whose ``seq`` it shares; the run page loads it when opened."""

    run = models.ForeignKey(
        Run, verbose_name=_("run"), on_delete=models.CASCADE, related_name="llm_call_records"
    )
    seq = models.PositiveIntegerField(_("sequence number"))  # of its llm.completed or llm.failed event
    purpose = models.CharField(_("purpose"), max_length=50, blank=True)
    model = models.CharField(_("model"), max_length=200, blank=True)
    messages = StoredJSONField(_("messages"), default=list, blank=True)  # as sent, OpenAI chat format
    tools = StoredJSONField(_("tools"), default=list, blank=True)  # the names of the tool schemas sent
    response_format = models.CharField(_("response format"), max_length=200, blank=True)  # a schema's name
    reply = StoredJSONField(_("reply"), null=True, blank=True)  # {content, tool_calls, finish_reason}
    error = models.TextField(_("error"), blank=True)

    class Meta:
        verbose_name = _("LLM call")
        verbose_name_plural = _("LLM calls")
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="unique_llm_call_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.purpose}"


class ToolApproval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")
        APPROVED = "approved", _("Approved")
        DENIED = "denied", _("Denied")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    approval_id = models.CharField(max_length=100)
    tool = models.CharField(max_length=100)
    args = StoredJSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("tool approval")
        verbose_name_plural = _("tool approvals")
        constraints = [models.UniqueConstraint(fields=["run", "approval_id"], name="unique_approval")]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"


class FeedbackRequest(models.Model):
    """A task with ``human_input`` waits here for a person's feedback on its answer."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")
        ANSWERED = "answered", _("Answered")

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="feedback_requests")
    task_key = models.CharField(max_length=100)
    answer = models.TextField()
    text = models.TextField(blank=True)  # empty accepts the answer
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("feedback request")
        verbose_name_plural = _("feedback requests")
        ordering = ["run", "created_at", "id"]

    def __str__(self) -> str:
        return _("feedback for %(task)s (%(status)s)") % {"task": self.task_key, "status": self.status}
