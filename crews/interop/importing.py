"""Importing a CrewAI project: its LLM and tool names matched to this site's, then its agents, the
crew and its tasks created in one transaction through the agents' and crews' services, so the
same rules hold as for a crew built by hand. A dry run does the same and rolls it back."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from agents.models import LLM, Agent
from agents.services import agent_create
from agents.tools import catalogue_names
from crews import services
from crews.interop.fields import CrewDraft, Draft, Ref, crew_draft
from crews.interop.knowledge import KnowledgeFiles, import_sources
from crews.interop.problems import ImportRejected, Problem
from crews.interop.sources import Project
from crews.models import Crew, Task
from crews.task_checks import GUARDRAIL_KEYS
from planner_site.errors import Forbidden
from planner_site.roles import can_build


@dataclass
class ImportResult:
    crew: Crew  # rolled back (not stored) after a dry run
    preview: dict[str, Any]
    notices: list[str]
    unknown_llms: list[str]
    unknown_tools: list[str]


def crew_import_check_role(*, actor: Any) -> None:
    """Only builders and admins import (checked before reading what they sent)."""
    if not can_build(actor):
        raise Forbidden(_("Your role cannot create or change agents and crews."))


def crew_import(
    *,
    actor: Any,
    project: Project,
    llm_map: Mapping[str, int | str | None] | None = None,
    tool_map: Mapping[str, str | None] | None = None,
    dry_run: bool = False,
) -> ImportResult:
    """Builders import a project as a new crew of theirs, with new agents; all of it or nothing.

    An LLM is matched by its name, else by its model string; a tool by its catalogue name.
    ``llm_map``/``tool_map`` settle the names this site lacks (``None``: leave unset); a name
    left unsettled refuses the import (a dry run treats it as unset and lists it). A crew or agent
    name the importer already uses gets the first free " (2)", " (3)", ... suffix.
    """
    crew_import_check_role(actor=actor)
    draft = crew_draft(project)
    problems: list[Problem] = []
    notices = list(draft.notices)
    llms, unknown_llms = _match_llms(draft, llm_map or {}, problems, notices)
    tools, unknown_tools = _match_tools(draft, tool_map or {}, problems, notices)
    if problems:
        raise ImportRejected(problems, unknown_llms=unknown_llms, unknown_tools=unknown_tools)
    if (unknown_llms or unknown_tools) and not dry_run:
        raise ImportRejected(
            _unknown_problems(draft, unknown_llms, unknown_tools),
            unknown_llms=unknown_llms, unknown_tools=unknown_tools, unknown_only=True,
        )
    with transaction.atomic():
        crew, preview = _create(actor, draft, llms, tools, notices, project.knowledge, dry_run=dry_run)
        if dry_run:
            transaction.set_rollback(True)
    return ImportResult(crew, preview, notices, unknown_llms, unknown_tools)


# Names -----------------------------------------------------------------------------------------


def _refs(draft: CrewDraft, kind: str) -> list[Ref]:
    drafts = [draft.crew, *draft.agents, *draft.tasks]
    if kind == "llm":
        return [ref for d in drafts for ref in d.llms.values()]
    return [ref for d in drafts for ref in d.tools]


def _unknown_problems(draft: CrewDraft, llms: list[str], tools: list[str]) -> list[Problem]:
    """Where each unknown name is first used, saying how to settle it."""
    problems = []
    for kind, names, message in (
        ("llm", llms, _("This site has no LLM named %(name)s: map it in llm_map (or to null).")),
        ("tool", tools, _("This site has no tool named %(name)s: map it in tool_map (or to null).")),
    ):
        first = {}
        for ref in _refs(draft, kind):
            first.setdefault(ref.name, ref)
        problems += [first[name].entry.problem(message % {"name": name}, *first[name].path) for name in names]
    return problems


def _map_problem(map_name: str, name: str, message: str) -> Problem:
    return Problem(map_name, None, name, message)


def _match_llms(
    draft: CrewDraft, mapping: Mapping[str, Any], problems: list[Problem], notices: list[str]
) -> tuple[dict[str, LLM | None], list[str]]:
    found: dict[str, LLM | None] = {}
    unknown: list[str] = []
    for name in dict.fromkeys(ref.name for ref in _refs(draft, "llm")):
        if name in mapping:
            target = mapping[name]
            if target is None or target == "":
                found[name] = None
                notices.append(_("LLM %(name)s is left unset: the site's default applies.") % {"name": name})
                continue
            # An id written as text: ASCII digits only ("²" and "١" are digits to str.isdigit).
            is_id = isinstance(target, int) or (isinstance(target, str) and re.fullmatch(r"[0-9]+", target))
            llm = (LLM.objects.filter(pk=int(target)).first() if is_id and int(target) < 2**63
                   else LLM.objects.filter(name=str(target)).first())
            if llm is None:
                problems.append(_map_problem("llm_map", name, _("This site has no LLM %(target)s.") % {"target": target}))
            found[name] = llm
            continue
        llm = LLM.objects.filter(name=name).first() or (
            LLM.objects.filter(model=name).order_by("-is_default", "name").first()
        )
        found[name] = llm
        if llm is None:
            unknown.append(name)
    return found, unknown


def _match_tools(
    draft: CrewDraft, mapping: Mapping[str, Any], problems: list[Problem], notices: list[str]
) -> tuple[dict[str, str | None], list[str]]:
    catalogue = set(catalogue_names())
    found: dict[str, str | None] = {}
    unknown: list[str] = []
    for name in dict.fromkeys(ref.name for ref in _refs(draft, "tool")):
        if name in mapping:
            target = mapping[name]
            if target is None or target == "":
                found[name] = None
                notices.append(_("Tool %(name)s is left out.") % {"name": name})
            elif target in catalogue:
                found[name] = target
            else:
                problems.append(_map_problem("tool_map", name, _("This site has no tool %(target)s.") % {"target": target}))
            continue
        # CrewAI refs may carry where the tool comes from: "crewai_tools:X", "custom:x".
        bare = name.rpartition(":")[2]
        found[name] = name if name in catalogue else bare if bare in catalogue else None
        if found[name] is None:
            unknown.append(name)
    return found, unknown


def free_name(name: str, taken: set[str], limit: int) -> str:
    """``name``, or the first of "name (2)", "name (3)", ... nobody has, within ``limit``."""
    if name not in taken:
        return name
    number = 2
    while True:
        suffix = f" ({number})"
        candidate = name[: limit - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        number += 1


# Creating --------------------------------------------------------------------------------------


def _rejected(exc: ValidationError, draft: Draft) -> ImportRejected:
    """A service's refusal, named at the place in the project the refused field came from."""
    if not hasattr(exc, "error_dict"):  # a refusal of the whole row ("the database refused ...")
        return ImportRejected([draft.entry.problem(message) for message in exc.messages])
    problems = []
    for field, messages in exc.message_dict.items():
        # The task checks name their own keys (``pattern``); they were all written as guardrails.
        name = "guardrails" if field in GUARDRAIL_KEYS else field
        if name not in draft.origin:
            name = name.partition(".")[0]
        problems += [draft.problem(message, name) for message in messages]
    return ImportRejected(problems)


def _create(
    actor: Any, draft: CrewDraft, llms: dict[str, LLM | None], tools: dict[str, str | None], notices: list[str],
    files: KnowledgeFiles | None = None, *, dry_run: bool = False,
) -> tuple[Crew, dict[str, Any]]:
    task_tools: dict[str, list[Ref]] = {}
    for task in draft.tasks:  # tools belong to agents here: a task's go to its agent
        if task.tools and task.agent is not None:
            task_tools.setdefault(task.agent.name, []).extend(task.tools)
            notices.append(_("%(where)s: a task's tools were given to its agent %(agent)s.")
                           % {"where": task.entry.problem("", "tools").place(), "agent": task.agent.name})
        elif task.tools:
            notices.append(_("%(where)s: a task without an agent cannot use tools; ignored.")
                           % {"where": task.entry.problem("", "tools").place()})
    limit = Agent._meta.get_field("name").max_length or 100
    taken = set(Agent.objects.filter(owner=actor).values_list("name", flat=True))
    agents: dict[str, Agent] = {}
    for item in draft.agents:
        fields = dict(item.fields)
        fields["name"] = free_name(fields["name"], taken, limit)
        if fields["name"] != item.fields["name"]:
            notices.append(_("You already have an agent named %(name)s: this one is %(new)s.")
                           % {"name": item.fields["name"], "new": fields["name"]})
        taken.add(fields["name"])
        if "llm" in item.llms:
            fields["llm"] = llms[item.llms["llm"].name]
        names = [tools[ref.name] for ref in [*item.tools, *task_tools.get(item.entry.key, [])]]
        fields["tools"] = list(dict.fromkeys(name for name in names if name))
        config = dict(item.planning_config) if item.planning_config is not None else None
        if config is not None and "planning_config.llm" in item.llms:
            config["llm"] = llms[item.llms["planning_config.llm"].name]
        try:
            agents[item.entry.key] = agent_create(actor=actor, planning_config=config, **fields)
        except ValidationError as exc:
            raise _rejected(exc, item) from None

    fields = dict(draft.crew.fields)
    limit = Crew._meta.get_field("name").max_length or 100
    fields["name"] = free_name(fields["name"], set(Crew.objects.filter(owner=actor).values_list("name", flat=True)), limit)
    if fields["name"] != draft.crew.fields["name"]:
        notices.append(_("You already have a crew named %(name)s: this one is %(new)s.")
                       % {"name": draft.crew.fields["name"], "new": fields["name"]})
    for slot in ("planning_llm", "manager_llm"):
        if slot in draft.crew.llms:
            fields[slot] = llms[draft.crew.llms[slot].name]
    try:
        crew = services.crew_create(actor=actor, agents=list(agents.values()), **fields)
    except ValidationError as exc:
        raise _rejected(exc, draft.crew) from None

    tasks: dict[str, Task] = {}
    for item in draft.tasks:
        agent = agents[item.agent.name] if item.agent is not None else None
        try:
            task = services.task_create(
                actor=actor, crew=crew, agent=agent, context=[tasks[r.name] for r in item.context], **item.fields
            )
        except ValidationError as exc:
            raise _rejected(exc, item) from None
        tasks[item.entry.key] = task
    _sources(actor, draft, crew, agents, files, notices, dry_run)
    return crew, _preview(crew, agents, tasks)


def _sources(actor: Any, draft: CrewDraft, crew: Crew, agents: dict[str, Agent], files: KnowledgeFiles | None,
             notices: list[str], dry_run: bool) -> None:
    """The knowledge sources the project lists, from its zip's files (a dry run only checks
    them); every file that cannot be one is named, and nothing is imported."""
    problems: list[Problem] = []
    owners = [(crew, crew.name, draft.crew.knowledge),
              *((agents[d.entry.key], agents[d.entry.key].name, d.knowledge) for d in draft.agents)]
    import_sources(actor=actor, owners=owners, files=files, problems=problems, notices=notices, dry_run=dry_run)
    if problems:
        raise ImportRejected(problems)


def _preview(crew: Crew, agents: dict[str, Agent], tasks: dict[str, Task]) -> dict[str, Any]:
    """What the import creates, in the order it comes: for a person to check before importing."""
    names = {task.pk: task.name for task in tasks.values()}
    return {
        "name": crew.name,
        "description": crew.description,
        "process": crew.process,
        "planning": crew.planning,
        "planning_llm": crew.planning_llm.name if crew.planning_llm else None,
        "manager_llm": crew.manager_llm.name if crew.manager_llm else None,
        "review_plan": crew.review_plan,
        "on_step_failure": crew.on_step_failure,
        "default_inputs": crew.default_inputs,
        "memory": crew.memory,
        "agents": [
            {
                "key": key,
                "name": agent.name,
                "role": agent.role,
                "goal": agent.goal,
                "llm": agent.llm.name if agent.llm else None,
                "tools": agent.tools,
                "planning": agent.planning or getattr(agent, "planning_config", None) is not None,
            }
            for key, agent in agents.items()
        ],
        "tasks": [
            {
                "key": key,
                "name": task.name,
                "agent": task.agent.name if task.agent else None,
                "context": [names[t.pk] for t in task.context.all()],
                "description": task.description,
                "expected_output": task.expected_output,
                "async_execution": task.async_execution,
                "human_input": task.human_input,
                "output_schema": task.output_schema,
                "guardrails": task.guardrails,
            }
            for key, task in tasks.items()
        ],
    }
