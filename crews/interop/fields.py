"""What the keys of a CrewAI project mean here: each agent, task and crew setting read, type-checked
and turned into the fields our services take, remembering where each came from.

Keys CrewAI knows that have no equivalent here (``allow_delegation``, ``verbose``, ``output_file``,
...) and keys nobody knows are ignored with a notice, as CrewAI's classic loader ignores unknown
keys. Our own settings that CrewAI lacks travel in a ``crew_planner`` object on the crew, each
agent and each task (``crews.interop.exporting`` writes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import models
from django.utils.translation import gettext as _
from pydantic import ValidationError as PydanticValidationError

from agents.models import Agent, PlanningConfig
from agents.schemas import ToolOptionsIn
from agents.tools import catalogue_names
from crews.interop.knowledge import SourceRef, read_listing
from crews.interop.problems import ImportRejected, Problem
from crews.interop.sources import Entry, Path, Project
from crews.models import Crew, OnStepFailure, Task

EXTRA = "crew_planner"  # our settings CrewAI has no key for
PLANNING_KEYS = (
    "reasoning_effort", "observe_steps", "max_attempts", "max_steps", "max_replans",
    "max_step_iterations", "step_timeout", "llm", "system_prompt", "plan_prompt", "refine_prompt",
)


@dataclass
class Ref:
    """A name (an LLM, a tool, an agent or task key) as the project writes it, and where: ``path``
    is relative to ``entry``."""

    name: str
    entry: Entry
    path: Path


@dataclass
class Draft:
    """One agent, task or the crew as our services will take it."""

    entry: Entry
    fields: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, Path] = field(default_factory=dict)  # model field → where it was written
    llms: dict[str, Ref] = field(default_factory=dict)  # "llm", "planning_config.llm", ...
    tools: list[Ref] = field(default_factory=list)
    planning_config: dict[str, Any] | None = None
    agent: Ref | None = None  # a task's agent key
    context: list[Ref] = field(default_factory=list)  # a task's context task keys
    knowledge: list[SourceRef] = field(default_factory=list)  # an agent's or the crew's sources

    def problem(self, message: str, field_name: str) -> Problem:
        return self.entry.problem(message, *self.origin.get(field_name, ()))


@dataclass
class CrewDraft:
    crew: Draft
    agents: list[Draft]
    tasks: list[Draft]
    notices: list[str]


class _Reader:
    """Reads one entry's keys, collecting problems and the keys it did not use."""

    def __init__(self, entry: Entry, draft: Draft, problems: list[Problem], data: dict[str, Any] | None = None,
                 paths: dict[str, Path] | None = None) -> None:
        self.entry, self.draft, self.problems = entry, draft, problems
        self.data = entry.data if data is None else data
        self.paths = paths or {}
        self.used: set[str] = set()

    def path(self, key: str) -> Path:
        return self.paths.get(key, (key,))

    def fail(self, message: str, key: str) -> None:
        self.problems.append(self.entry.problem(message, *self.path(key)))

    def get(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key)

    def has(self, key: str) -> bool:
        return key in self.data

    def put(self, model_field: str, value: Any, key: str) -> None:
        self.draft.fields[model_field] = value
        self.draft.origin[model_field] = self.path(key)

    def text(self, key: str, model: type[models.Model], model_field: str, *, required: bool = False,
             default: str | None = None, name: bool = False) -> None:
        """A text kept exactly as written (the YAML reader drops a block scalar's last line break);
        a ``name`` loses its outer spaces, as the API trims names."""
        value = self.get(key)
        if value is None:
            value = default
        if value is None:
            if required:
                self.fail(_("This is required."), key)
            return
        if not isinstance(value, str):
            self.fail(_("Give text here."), key)
            return
        if name:
            value = value.strip()
        if required and not value.strip():
            self.fail(_("This is required."), key)
            return
        limit = model._meta.get_field(model_field).max_length
        if limit is not None and len(value) > limit:
            self.fail(_("This text is too long: %(n)s characters, at most %(max)s.")
                      % {"n": len(value), "max": limit}, key)
            return
        self.put(model_field, value, key)

    def integer(self, key: str, model_field: str, *, nullable: bool = False) -> None:
        if not self.has(key):
            return
        value = self.get(key)
        if value is None and nullable:
            self.put(model_field, None, key)
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(_("Give a whole number of 0 or more here."), key)
        else:
            self.put(model_field, value, key)

    def boolean(self, key: str, model_field: str) -> None:
        if not self.has(key):
            return
        value = self.get(key)
        if isinstance(value, bool):
            self.put(model_field, value, key)
        else:
            self.fail(_("Give true or false here."), key)

    def choice(self, key: str, model_field: str, choices: tuple[str, ...]) -> None:
        if not self.has(key):
            return
        value = self.get(key)
        if value in choices:
            self.put(model_field, value, key)
        else:
            self.fail(_("Give one of: %(choices)s.") % {"choices": ", ".join(choices)}, key)

    def llm(self, key: str, slot: str, notices: list[str]) -> None:
        if not self.has(key):
            return
        value = self.get(key)
        name = llm_name(value)
        if value is None:
            return
        if name is None:
            self.fail(_("Give an LLM's name, or an object with its model."), key)
            return
        if isinstance(value, dict) and set(value) - {"model", "provider"}:
            notices.append(_("%(where)s: only the LLM's model is read; this site's LLM settings apply.")
                           % {"where": self.entry.problem("", *self.path(key)).place()})
        self.draft.llms[slot] = Ref(name, self.entry, self.path(key))
        self.draft.origin[slot] = self.path(key)

    def extra(self) -> _Reader:
        """A reader of the ``crew_planner`` object (our settings), or of nothing."""
        value = self.get(EXTRA)
        if value is not None and not isinstance(value, dict):
            self.fail(_("Give these settings as a mapping (key: value)."), EXTRA)
            value = None
        data = value or {}
        return _Reader(self.entry, self.draft, self.problems, data,
                       {k: (*self.path(EXTRA), k) for k in data})

    def ignored(self, notices: list[str]) -> None:
        left = sorted(str(k) for k in self.data if k not in self.used)
        if left:
            where = self.entry.problem("").place()
            notices.append(_("%(where)s: not used here, ignored: %(keys)s.") % {"where": where, "keys": ", ".join(left)})


def llm_name(value: Any) -> str | None:
    """An LLM as CrewAI writes it: a name or model string, or ``{model, provider, ...}``."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, dict) and isinstance(value.get("model"), str) and value["model"].strip():
        model = value["model"].strip()
        provider = value.get("provider")
        if isinstance(provider, str) and provider and "/" not in model:
            return f"{provider}/{model}"
        return model
    return None


# Agents ----------------------------------------------------------------------------------------


def _agent(entry: Entry, problems: list[Problem], notices: list[str]) -> Draft:
    draft = Draft(entry)
    data = dict(entry.data)
    paths: dict[str, Path] = {k: (k,) for k in data}
    settings = data.pop("settings", None)  # JSONC: behaviour settings, which win as in CrewAI
    if isinstance(settings, dict):
        data.update(settings)
        paths.update({k: ("settings", k) for k in settings})
    elif settings is not None:
        problems.append(entry.problem(_("Give these settings as an object."), "settings"))
    read = _Reader(entry, draft, problems, data, paths)
    ours = read.extra()
    ours.text("name", Agent, "name", default=entry.key, required=True, name=True)
    if not ours.has("name"):
        draft.origin["name"] = ()  # the agent's key is its name
    read.text("role", Agent, "role", required=True)
    read.text("goal", Agent, "goal", required=True)
    read.text("backstory", Agent, "backstory", default="")
    read.llm("llm", "llm", notices)
    tools = read.get("tools")
    if isinstance(tools, list):
        for index, tool in enumerate(tools):
            if isinstance(tool, str) and tool.strip():
                draft.tools.append(Ref(tool.strip(), entry, (*read.path("tools"), index)))
            else:
                read.fail(_("Give each tool by its name."), "tools")
    elif tools is not None:
        read.fail(_("List the tools by name."), "tools")
    for key in ("max_iter", "max_retry_limit"):
        read.integer(key, key)
    for key in ("max_rpm", "max_execution_time"):
        read.integer(key, key, nullable=True)
    read.boolean("respect_context_window", "respect_context_window")
    read.boolean("planning", "planning")
    _planning(read, draft, notices)
    ours.choice("agent_type", "agent_type", tuple(Agent.AgentType.values))
    _knowledge(ours, draft)
    _tool_options(ours)
    budget = ours.get("budget")
    if isinstance(budget, dict):
        spend = _Reader(entry, draft, problems, budget, {k: (*ours.path("budget"), k) for k in budget})
        spend.integer("max_tool_calls", "budget_max_tool_calls", nullable=True)
        spend.integer("max_input_tokens", "budget_max_input_tokens", nullable=True)
        spend.ignored(notices)
    elif budget is not None:
        ours.fail(_("Give these settings as a mapping (key: value)."), "budget")
    read.ignored(notices)
    ours.ignored(notices)
    return draft


def _knowledge(ours: _Reader, draft: Draft) -> None:
    """The sources listed in ``crew_planner.knowledge`` (``crews.interop.knowledge``)."""
    draft.knowledge = read_listing(
        ours.get("knowledge"),
        lambda index: ours.entry.problem("", *ours.path("knowledge"), index),
        lambda message: ours.fail(message, "knowledge"),
    )


def _tool_options(ours: _Reader) -> None:
    """Options per tool, checked as the agents' API checks them (``ToolOptionsIn``), for tools
    this site has: the agent's page reads them back."""
    options = ours.get("tool_options")
    if options is None:
        return
    if not isinstance(options, dict):
        ours.fail(_("Give these settings as a mapping (key: value)."), "tool_options")
        return
    catalogue = set(catalogue_names())
    checked: dict[str, Any] = {}
    for tool, chosen in options.items():
        where = (*ours.path("tool_options"), tool)
        if tool not in catalogue:
            ours.problems.append(ours.entry.problem(_("This site has no tool %(target)s.") % {"target": tool}, *where))
            continue
        try:
            checked[tool] = ToolOptionsIn.model_validate(chosen).model_dump(exclude_unset=True)
        except PydanticValidationError:
            ours.problems.append(ours.entry.problem(_(
                "Give this tool's options as a mapping: needs_approval and result_as_answer (true or "
                "false), max_usage (a whole number of 1 or more)."), *where))
    ours.put("tool_options", checked, "tool_options")


def _planning(read: _Reader, draft: Draft, notices: list[str]) -> None:
    """``planning_config`` as given; else CrewAI's deprecated ``reasoning``/``max_reasoning_attempts``
    become a config at medium effort with that many attempts (ENGINE.md §2), said in a notice."""
    config = read.get("planning_config")
    reasoning = read.get("reasoning")
    attempts = read.get("max_reasoning_attempts")
    where = read.entry.problem("").place()
    if config is not None:
        if not isinstance(config, dict):
            read.fail(_("Give the planning settings as a mapping (key: value)."), "planning_config")
            return
        sub = _Reader(read.entry, draft, read.problems, config,
                      {k: (*read.path("planning_config"), k) for k in config})
        before = dict(draft.fields)
        for key in ("max_steps", "max_replans", "max_step_iterations"):
            sub.integer(key, key)
        for key in ("max_attempts", "step_timeout"):
            sub.integer(key, key, nullable=True)
        sub.choice("reasoning_effort", "reasoning_effort", tuple(PlanningConfig.Effort.values))
        if sub.has("observe_steps") and sub.data["observe_steps"] is not None:
            sub.boolean("observe_steps", "observe_steps")
        else:
            sub.get("observe_steps")
        for key in ("system_prompt", "plan_prompt", "refine_prompt"):
            sub.text(key, PlanningConfig, key)
        sub.llm("llm", "planning_config.llm", notices)
        moved = {k: v for k, v in draft.fields.items() if k not in before}
        draft.fields = before
        draft.planning_config = moved
        for key in moved:
            draft.origin[f"planning_config.{key}"] = draft.origin.pop(key)
        sub.ignored(notices)
        if reasoning is not None or attempts is not None:
            notices.append(_("%(where)s: reasoning and max_reasoning_attempts are deprecated and "
                             "planning_config is given: they were ignored.") % {"where": where})
        return
    if reasoning is True:
        if attempts is not None and (isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1):
            read.fail(_("Give a whole number of 1 or more here."), "max_reasoning_attempts")
            return
        draft.planning_config = {"reasoning_effort": PlanningConfig.Effort.MEDIUM, "max_attempts": attempts}
        draft.origin["planning_config.max_attempts"] = read.path("max_reasoning_attempts" if attempts else "reasoning")
        notices.append(_("%(where)s: reasoning is deprecated; it became a planning config at medium effort "
                         "with %(attempts)s planning attempts.")
                       % {"where": where, "attempts": attempts or _("up to 10")})
    elif reasoning not in (None, False):
        read.fail(_("Give true or false here."), "reasoning")
    elif attempts is not None:
        notices.append(_("%(where)s: max_reasoning_attempts without reasoning was ignored.") % {"where": where})


# Tasks -----------------------------------------------------------------------------------------


def _task(entry: Entry, problems: list[Problem], notices: list[str]) -> Draft:
    draft = Draft(entry)
    read = _Reader(entry, draft, problems)
    ours = read.extra()
    if ours.has("name"):  # our name, where the key (a CrewAI reference) differs from it
        ours.text("name", Task, "name", required=True, name=True)
        read.get("name")
    else:
        read.text("name", Task, "name", default=entry.key, required=True, name=True)
    read.text("description", Task, "description", required=True)
    read.text("expected_output", Task, "expected_output", required=True)
    read.boolean("async_execution", "async_execution")
    read.boolean("human_input", "human_input")
    agent = read.get("agent")
    if isinstance(agent, str) and agent.strip():
        draft.agent = Ref(agent.strip(), entry, read.path("agent"))
    elif agent is not None:
        read.fail(_("Give the agent's key."), "agent")
    context = read.get("context")
    if isinstance(context, list) and all(isinstance(c, str) for c in context):
        draft.context = [Ref(c, entry, (*read.path("context"), i)) for i, c in enumerate(context)]
    elif context is not None:
        read.fail(_("List the keys of earlier tasks."), "context")
    tools = read.get("tools")
    if isinstance(tools, list):
        draft.tools = [Ref(t.strip(), entry, (*read.path("tools"), i)) for i, t in enumerate(tools)
                       if isinstance(t, str) and t.strip()]
    # The answer's shape: a JSON schema (ours, or CrewAI's output_json/output_pydantic written as
    # one); a class name is Python this site cannot load.
    for key in ("output_json", "output_pydantic"):
        value = read.get(key)
        if value is None:
            continue
        if isinstance(value, dict) and "python" not in value:
            if "output_schema" not in draft.fields:
                read.put("output_schema", value, key)  # the task service checks the schema
        elif isinstance(value, str | dict):
            notices.append(_("%(where)s: %(key)s names a Python class, which cannot be loaded here; give "
                             "the task a JSON schema instead.")
                           % {"where": entry.problem("", key).place(), "key": key})
        else:
            notices.append(_("%(where)s: %(key)s is neither a JSON schema (a mapping) nor a class name; "
                             "ignored.") % {"where": entry.problem("", key).place(), "key": key})
    if ours.has("output_schema"):
        ours.put("output_schema", ours.get("output_schema"), "output_schema")
    _guardrails(read, ours, draft, notices)
    read.integer("guardrail_max_retries", "guardrail_max_retries")
    read.ignored(notices)
    ours.ignored(notices)
    return draft


def _guardrails(read: _Reader, ours: _Reader, draft: Draft, notices: list[str]) -> None:
    checks: dict[str, Any] = {}
    if ours.has("guardrails"):
        value = ours.get("guardrails")
        if not isinstance(value, dict):
            ours.fail(_("Give the checks as a mapping (key: value)."), "guardrails")
            return
        checks.update(value)  # the task service checks them (crews.task_checks)
    criteria = list(checks["criteria"]) if isinstance(checks.get("criteria"), list) else []
    for key in ("guardrail", "guardrails"):
        value = read.get(key)
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else None
        if value is None:
            continue
        if texts is None:
            notices.append(_("%(where)s: a guardrail written as Python cannot be loaded here; ignored.")
                           % {"where": read.entry.problem("", key).place()})
            continue
        for text in texts:
            if isinstance(text, str) and text.strip():
                criteria.append(text)  # as written, repeats too: the task service cleans them
            else:
                notices.append(_("%(where)s: a guardrail written as Python cannot be loaded here; ignored.")
                               % {"where": read.entry.problem("", key).place()})
        draft.origin.setdefault("guardrails", read.path(key))
    if criteria:
        checks["criteria"] = criteria
    if checks:
        draft.fields["guardrails"] = checks
        draft.origin.setdefault("guardrails", ours.path("guardrails"))


# The crew --------------------------------------------------------------------------------------


def _crew(entry: Entry, problems: list[Problem], notices: list[str]) -> Draft:
    draft = Draft(entry)
    read = _Reader(entry, draft, problems)
    ours = read.extra()
    read.text("name", Crew, "name", default=_("Imported crew"), required=True, name=True)
    if ours.has("description"):
        ours.text("description", Crew, "description")
    else:
        read.text("description", Crew, "description")
    read.choice("process", "process", tuple(Crew.Process.values))
    read.boolean("planning", "planning")
    read.boolean("memory", "memory")
    read.llm("planning_llm", "planning_llm", notices)
    read.llm("manager_llm", "manager_llm", notices)
    if "manager_llm" not in draft.origin and "process" in draft.origin:
        draft.origin["manager_llm"] = draft.origin["process"]  # a hierarchical crew needs one
    read.integer("max_rpm", "max_rpm", nullable=True)
    inputs = read.get("inputs")
    if isinstance(inputs, dict):
        read.put("default_inputs", inputs, "inputs")
    elif inputs is not None:
        read.fail(_("Give the default inputs as a mapping of name: value."), "inputs")
    ours.boolean("review_plan", "review_plan")
    ours.boolean("run_without_plan_on_failure", "run_without_plan_on_failure")
    ours.choice("on_step_failure", "on_step_failure", tuple(OnStepFailure.values))
    _knowledge(ours, draft)
    budget = ours.get("budget")
    if isinstance(budget, dict):
        spend = _Reader(entry, draft, problems, budget, {k: (*ours.path("budget"), k) for k in budget})
        spend.integer("max_tokens", "budget_max_tokens", nullable=True)
        if spend.has("max_cost_usd"):
            cost = spend.get("max_cost_usd")
            try:
                value = None if cost is None else Decimal(str(cost))
            except InvalidOperation:
                value = Decimal(-1)
            if isinstance(cost, bool) or (value is not None and (not value.is_finite() or value <= 0)):
                spend.fail(_("Give an amount above 0 here."), "max_cost_usd")
            else:
                spend.put("budget_max_cost_usd", value, "max_cost_usd")
        spend.ignored(notices)
    elif budget is not None:
        ours.fail(_("Give these settings as a mapping (key: value)."), "budget")
    read.ignored(notices)
    ours.ignored(notices)
    return draft


def _links(agents: list[Draft], tasks: list[Draft], problems: list[Problem]) -> None:
    """Every task's agent is one of the project's; its context names earlier tasks only."""
    agent_keys = {a.entry.key for a in agents}
    order = {t.entry.key: i for i, t in enumerate(tasks)}
    seen: set[str] = set()
    for index, task in enumerate(tasks):
        if task.entry.key in seen:
            problems.append(task.entry.problem(_("Two tasks have this key; give each task its own.")))
        seen.add(task.entry.key)
        if task.agent is not None and task.agent.name not in agent_keys:
            problems.append(task.entry.problem(
                _("There is no agent %(name)s. Agents: %(agents)s.")
                % {"name": task.agent.name, "agents": ", ".join(sorted(agent_keys)) or "-"},
                *task.agent.path))
        for ref in task.context:
            at = ref.path
            if ref.name not in order:
                message = _("There is no task %(name)s.") % {"name": ref.name}
            elif order[ref.name] == index:
                message = _("A task cannot use its own output.")
            elif order[ref.name] > index:
                cycle = _cycle(tasks, order, ref.name, task.entry.key)
                if cycle:
                    message = _("The context forms a cycle: %(cycle)s.") % {"cycle": " → ".join(cycle)}
                else:
                    message = _("%(name)s comes later; a task can only use the output of earlier tasks.") % {
                        "name": ref.name}
            else:
                continue
            problems.append(task.entry.problem(message, *at))


def _cycle(tasks: list[Draft], order: dict[str, int], start: str, goal: str) -> list[str]:
    """The context path from ``goal`` through ``start`` back to ``goal``, if there is one."""
    uses = {t.entry.key: [r.name for r in t.context if r.name in order] for t in tasks}
    stack: list[tuple[str, list[str]]] = [(start, [goal, start])]
    visited: set[str] = set()
    while stack:
        key, path = stack.pop()
        if key == goal:
            return path
        if key in visited:
            continue
        visited.add(key)
        stack.extend((used, [*path, used]) for used in uses.get(key, []))
    return []


def crew_draft(project: Project) -> CrewDraft:
    """Everything the project says, checked for shape; ImportRejected names every problem found."""
    problems: list[Problem] = []
    notices: list[str] = []
    crew = _crew(project.crew, problems, notices)
    agents = [_agent(entry, problems, notices) for entry in project.agents]
    tasks = [_task(entry, problems, notices) for entry in project.tasks]
    _links(agents, tasks, problems)
    if problems:
        raise ImportRejected(problems)
    return CrewDraft(crew, agents, tasks, notices)
