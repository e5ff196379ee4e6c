"""Exporting a crew as a zip of both CrewAI layouts: classic YAML (``config/agents.yaml``,
``config/tasks.yaml``, plus our ``config/crew.yaml`` for what CrewAI keeps in ``crew.py``) and
JSONC (``crew.jsonc``, ``agents/<key>.jsonc``); knowledge sources' files under ``knowledge/``
(``crews.interop.knowledge``).

CrewAI's keys carry what CrewAI has; our own settings ride in ``crew_planner`` objects. LLMs and
tools are written by name, never with a key, an address or any other secret. Importing the zip
gives an equal crew (``crews.interop.importing``), every text to the character.

YAML texts: a multi-line text is a literal block (``|``) with one line break added, which the
importer drops as the layout of any block scalar (``|`` and ``>``, as CrewAI's templates write
them). Where a block cannot hold the text as it is (a line ending in spaces or tabs, a
character YAML must escape), PyYAML writes it double-quoted instead: harder to read, still exact.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import zipfile
from decimal import Decimal
from typing import IO, Any

import yaml
from django.db import models

from agents.models import Agent
from crews.interop.fields import EXTRA
from crews.interop.knowledge import LEFT_OUT_FILE, export_sources, left_out_note
from crews.interop.sources import JSONC, YAML
from crews.models import Crew, Task


def slug_key(name: str, taken: set[str], fallback: str) -> str:
    """A stable snake_case key for ``name``, unique among ``taken`` (which it joins)."""
    key = re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_") or fallback
    if key[0].isdigit():
        key = f"{fallback}_{key}"
    unique, number = key, 2
    while unique in taken:
        unique, number = f"{key}_{number}", number + 1
    taken.add(unique)
    return unique


def _default(model: type[models.Model], field: str) -> Any:
    return model._meta.get_field(field).get_default()


def _changed(obj: models.Model, fields: tuple[str, ...]) -> dict[str, Any]:
    """The fields of ``obj`` that differ from their model's defaults."""
    return {f: getattr(obj, f) for f in fields if getattr(obj, f) != _default(type(obj), f)}


def _agent(agent: Agent, key: str) -> dict[str, Any]:
    data: dict[str, Any] = {"role": agent.role, "goal": agent.goal, "backstory": agent.backstory}
    if agent.llm is not None:
        data["llm"] = agent.llm.name
    if agent.tools:
        data["tools"] = list(agent.tools)
    data.update(_changed(agent, ("max_iter", "max_rpm", "max_execution_time", "max_retry_limit",
                                 "respect_context_window", "planning")))
    config = getattr(agent, "planning_config", None)
    if config is not None:
        planning = _changed(config, ("observe_steps", "max_attempts", "max_steps", "max_replans",
                                     "max_step_iterations", "step_timeout", "system_prompt", "plan_prompt",
                                     "refine_prompt"))
        planning = {"reasoning_effort": config.reasoning_effort, **planning}
        if config.llm is not None:
            planning["llm"] = config.llm.name
        data["planning_config"] = planning
    ours: dict[str, Any] = {}
    if agent.name != key:
        ours["name"] = agent.name
    ours.update(_changed(agent, ("agent_type", "tool_options")))
    budget = {"max_tool_calls": agent.budget_max_tool_calls, "max_input_tokens": agent.budget_max_input_tokens}
    if any(v is not None for v in budget.values()):
        ours["budget"] = budget
    if ours:
        data[EXTRA] = ours
    return data


def _task(task: Task, key: str, agent_keys: dict[int, str], task_keys: dict[int, str]) -> dict[str, Any]:
    data: dict[str, Any] = {"description": task.description, "expected_output": task.expected_output}
    if task.agent_id is not None:
        data["agent"] = agent_keys[task.agent_id]
    context = sorted(task.context.all(), key=lambda t: (t.order, t.pk))
    if context:
        data["context"] = [task_keys[t.pk] for t in context]
    data.update(_changed(task, ("async_execution", "human_input")))
    checks = dict(task.guardrails or {})
    criteria = checks.pop("criteria", None)
    if criteria:
        data["guardrails"] = list(criteria)
    if task.guardrail_max_retries != _default(Task, "guardrail_max_retries"):
        data["guardrail_max_retries"] = task.guardrail_max_retries
    ours: dict[str, Any] = {}
    if task.name != key:
        ours["name"] = task.name
    if task.output_schema is not None:
        ours["output_schema"] = task.output_schema
    if checks:
        ours["guardrails"] = checks
    if ours:
        data[EXTRA] = ours
    return data


def _money(value: Decimal | None) -> float | None:
    return float(value) if value is not None else None


def _crew(crew: Crew) -> dict[str, Any]:
    data: dict[str, Any] = {"name": crew.name, "process": crew.process, "planning": crew.planning,
                            "memory": crew.memory}
    if crew.planning_llm is not None:
        data["planning_llm"] = crew.planning_llm.name
    if crew.manager_llm is not None:
        data["manager_llm"] = crew.manager_llm.name
    if crew.max_rpm is not None:
        data["max_rpm"] = crew.max_rpm
    data["inputs"] = dict(crew.default_inputs or {})
    ours: dict[str, Any] = {}
    if crew.description:
        ours["description"] = crew.description
    ours.update(_changed(crew, ("review_plan", "run_without_plan_on_failure", "on_step_failure")))
    budget = {"max_tokens": crew.budget_max_tokens, "max_cost_usd": _money(crew.budget_max_cost_usd)}
    if any(v is not None for v in budget.values()):
        ours["budget"] = budget
    if ours:
        data[EXTRA] = ours
    return data


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line texts as literal blocks (``|``): CrewAI's folded ``>`` would merge their lines."""


def _str(dumper: _LiteralDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        block = value + "\n"  # the importer drops a block's last line break
        if dumper.analyze_scalar(block).allow_block:
            return dumper.represent_scalar("tag:yaml.org,2002:str", block, style="|")
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')  # escapes are exact
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_LiteralDumper.add_representer(str, _str)


def _yaml(data: Any) -> bytes:
    text = yaml.dump(data, Dumper=_LiteralDumper, sort_keys=False, allow_unicode=True, width=10_000)
    return text.encode()


def _jsonc(data: Any) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


# An export's zip is written to a temporary file past this size (with knowledge sources it may
# reach ``MAX_KNOWLEDGE_BYTES``), which is gone once closed; below it, in memory (most crews).
SPOOL_BYTES = 256 * 1024
# A file is compressed this much at a time: zlib's output for a whole file would sit in memory
# beside it (tests/crews/test_interop_export_stream.py: 1 MB slices kept 2.2 MB more than the file).
WRITE_BYTES = 64 * 1024


def _write(archive: zipfile.ZipFile, path: str, content: bytes) -> None:
    """``archive.writestr(path, content)`` (same date and permissions), compressing a slice at a
    time: writestr holds the whole compressed file in memory besides ``content``."""
    info = zipfile.ZipInfo(path, date_time=time.localtime()[:6])
    info.compress_type = archive.compression
    info.external_attr = 0o600 << 16
    view = memoryview(content)
    with archive.open(info, "w") as file:
        for start in range(0, len(view), WRITE_BYTES):
            file.write(view[start:start + WRITE_BYTES])


def crew_export(*, crew: Crew, layout: str = YAML) -> tuple[str, IO[bytes]]:
    """The crew as a zip of both layouts, ``layout``'s files before the other's (the one an import of
    this zip reads); returns the zip's file name and the zip, a temporary file at its start (close it
    to remove it; a response streaming it does). A knowledge file is read from the database only as
    it is written, so the export holds at most one at a time."""
    agents = sorted(crew.agents.all().select_related("llm", "planning_config__llm"), key=lambda a: (a.name, a.pk))
    tasks = list(crew.tasks.order_by("order", "id").select_related("agent").prefetch_related("context"))
    # An agent doing a task is a member of the crew (services._attach_agent); be safe anyway.
    agents += [t.agent for t in tasks if t.agent is not None and t.agent not in agents]
    taken: set[str] = set()
    agent_keys = {a.pk: slug_key(a.name, taken, "agent") for a in agents}
    taken = set()
    task_keys = {t.pk: slug_key(t.name, taken, "task") for t in tasks}
    agent_data = {agent_keys[a.pk]: _agent(a, agent_keys[a.pk]) for a in agents}
    task_data = {task_keys[t.pk]: _task(t, task_keys[t.pk], agent_keys, task_keys) for t in tasks}
    crew_data = _crew(crew)
    exported = export_sources([crew, *agents])
    spooled = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 (the caller closes it)
    try:
        with zipfile.ZipFile(spooled, "w", zipfile.ZIP_DEFLATED) as archive:
            # Knowledge sources travel as files under knowledge/, listed by their owner; memories
            # do not. The files go first, so a source deleted while they are written is left off
            # the lists written after them (an import refuses a listed file that is not there).
            for path, content in exported.contents():
                if content is None:
                    exported.drop(path)
                else:
                    _write(archive, path, content)
                del content  # before the next file is read: one in memory at a time
            if exported.left_out:  # past the size an import takes: named in a note, never silently dropped
                _write(archive, LEFT_OUT_FILE, left_out_note(exported.left_out).encode())
            for owner, entries in exported.listed.items():
                data = crew_data if owner is crew else agent_data[agent_keys[owner.pk]]
                data.setdefault(EXTRA, {})["knowledge"] = entries
            classic = [
                ("config/agents.yaml", _yaml(agent_data)),
                ("config/tasks.yaml", _yaml(task_data)),
                ("config/crew.yaml", _yaml(crew_data)),
            ]
            jsonc_crew = {"name": crew_data["name"], "agents": list(agent_data),
                          # A JSONC task's name is its key, which context lists refer to.
                          "tasks": [{"name": key, **data} for key, data in task_data.items()],
                          **{k: v for k, v in crew_data.items() if k != "name"}}
            jsonc = [("crew.jsonc", _jsonc(jsonc_crew))]
            jsonc += [(f"agents/{key}.jsonc", _jsonc(data)) for key, data in agent_data.items()]
            for path, text in classic + jsonc if layout != JSONC else jsonc + classic:
                _write(archive, path, text)
    except BaseException:
        spooled.close()
        raise
    spooled.seek(0)
    filename = f"{slug_key(crew.name, set(), 'crew')}.{layout}.zip"
    return filename, spooled
