"""Reads of the agents app, including who may see what (another user's agent is a 404)."""

from __future__ import annotations

import difflib
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils.translation import gettext as _

from agents.engine.prompts import DEFAULTS as PROMPT_DEFAULTS
from agents.engine.prompts import PromptBook
from agents.models import LLM, Agent, PromptTemplate, PromptTemplateVersion
from planner_site.errors import Forbidden, NotFound
from planner_site.models import AuditEvent
from planner_site.prepared import Prepared
from planner_site.roles import can_build, is_admin


def llm_list() -> QuerySet[LLM]:
    return LLM.objects.all()


def llm_get(*, llm_id: int) -> LLM:
    llm = LLM.objects.filter(pk=llm_id).first()
    if llm is None:
        raise NotFound(_("No LLM with id %(id)s.") % {"id": llm_id})
    return llm


def llm_default() -> LLM | None:
    return LLM.objects.filter(is_default=True).first()


def demo_model_is_default() -> bool:
    default = llm_default()
    return default is None or default.is_demo


def agent_visible(*, user: Any) -> QuerySet[Agent]:
    qs = Agent.objects.select_related("llm", "planning_config", "owner")
    if is_admin(user):
        return qs
    return qs.filter(Q(owner=user) | Q(crews__shared=True)).distinct()


def agent_list(*, user: Any) -> QuerySet[Agent]:
    return agent_visible(user=user).order_by("name", "id")


def agent_get(*, user: Any, agent_id: int, for_write: bool = False) -> Agent:
    """The agent if ``user`` may see it (and change it, with ``for_write``); else NotFound."""
    agent = agent_visible(user=user).filter(pk=agent_id).first()
    if agent is None:
        raise NotFound(_("No agent with id %(id)s.") % {"id": agent_id})
    if for_write and not (is_admin(user) or (agent.owner_id == user.pk and can_build(user))):
        # A viewer already sees this agent: its role is what stops it (403). A builder
        # looking at someone else's shared agent gets the same 404 as for a missing one.
        if can_build(user):
            raise NotFound(_("No agent with id %(id)s.") % {"id": agent_id})
        raise Forbidden(_("Your role cannot change agents."))
    return agent


def prompt_list() -> list[tuple[PromptTemplate, PromptTemplateVersion | None]]:
    templates = list(PromptTemplate.objects.prefetch_related("versions"))
    return [(t, max(t.versions.all(), key=lambda v: v.number, default=None)) for t in templates]


def prompt_get(*, key: str) -> tuple[PromptTemplate, PromptTemplateVersion]:
    template = PromptTemplate.objects.filter(key=key).first()
    version = template.versions.order_by("-number").first() if template else None
    if template is None or version is None:
        raise NotFound(_("No prompt template %(key)s.") % {"key": key})
    return template, version


def prompt_versions(*, key: str) -> QuerySet[PromptTemplateVersion]:
    prompt_get(key=key)
    return PromptTemplateVersion.objects.filter(template__key=key).order_by("-number")


def _newest_versions() -> QuerySet[PromptTemplateVersion]:
    """Each template's newest version."""
    newest = PromptTemplateVersion.objects.filter(template=OuterRef("template")).order_by("-number")
    return PromptTemplateVersion.objects.filter(number=Subquery(newest.values("number")[:1]))


def _current_prompts() -> QuerySet[PromptTemplateVersion]:
    return _newest_versions().filter(template__key__in=list(PROMPT_DEFAULTS)).values_list("template__key", "text")


# Every run reads it; compiling the subquery was most of its cost (planner_site.prepared).
_CURRENT_PROMPTS = Prepared(_current_prompts)


def prompt_book() -> PromptBook:
    """The current text of every prompt, for one run of the engine: each template's newest
    version, read fresh in one query (an admin's save holds from the next run on)."""
    return PromptBook(dict(_CURRENT_PROMPTS.rows()))


def agent_can_write(*, user: Any, agent: Agent) -> bool:
    """Whether ``user`` may change ``agent`` (pages hide their edit controls otherwise)."""
    return is_admin(user) or (agent.owner_id == user.pk and can_build(user))


def agent_choices(*, owner: Any) -> QuerySet[Agent]:
    """The agents a crew of ``owner`` may use: the owner's own (crews never borrow agents)."""
    return Agent.objects.filter(owner=owner).order_by("name", "id")


# Prompt pages (admins) -------------------------------------------------------------------------


def prompt_version_get(*, key: str, number: int) -> PromptTemplateVersion:
    version = (PromptTemplateVersion.objects.select_related("template", "created_by")
               .filter(template__key=key, number=number).first())
    if version is None:
        raise NotFound(_("Prompt %(key)s has no version %(n)s.") % {"key": key, "n": number})
    return version


def prompt_history(*, key: str) -> list[tuple[PromptTemplateVersion, dict[str, Any]]]:
    """Every version of ``key``, newest first, with what its save said in the audit log
    (``note``, and ``restored_from`` or ``reset``)."""
    template, _current = prompt_get(key=key)
    versions = list(prompt_versions(key=key).select_related("created_by"))
    saved = AuditEvent.objects.filter(action="prompt.updated", target_type="prompttemplate",
                                      target_id=str(template.pk)).values_list("data", flat=True)
    said = {d.get("version"): d for d in saved if isinstance(d, dict)}
    return [(v, said.get(v.number, {})) for v in versions]


# Every kickoff reads it, like ``_CURRENT_PROMPTS``, but picks the engine's prompts itself: the
# SQL's list of their eighty keys cost SQLite more than all the rows it would leave out.
_NEWEST_NUMBERS = Prepared(lambda: _newest_versions().values_list("template__key", "number"))


def prompt_version_numbers() -> dict[str, int]:
    """The current version number of every prompt the engine sends: what a run records at
    kickoff as the prompts it uses (its snapshot's ``prompts``)."""
    return {key: number for key, number in _NEWEST_NUMBERS.rows() if key in PROMPT_DEFAULTS}


def prompt_diff(*, key: str, a: int, b: int) -> dict[str, Any]:
    """Version ``a`` against version ``b`` line by line (``difflib``): each line ``added``,
    ``removed`` or ``same`` (three lines of context around a change), ``gap`` between hunks."""
    old, new = prompt_version_get(key=key, number=a), prompt_version_get(key=key, number=b)
    lines: list[dict[str, str]] = []
    for line in difflib.unified_diff(old.text.splitlines(), new.text.splitlines(), lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            if lines:
                lines.append({"op": "gap", "text": ""})
            continue
        lines.append({"op": {"+": "added", "-": "removed"}.get(line[:1], "same"), "text": line[1:]})
    return {"old": old, "new": new, "lines": lines, "same": old.text == new.text}
