"""Reads of the agents app, including who may see what (another user's agent is a 404)."""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils.translation import gettext as _

from agents.engine.prompts import DEFAULTS as PROMPT_DEFAULTS
from agents.engine.prompts import PromptBook
from agents.models import LLM, Agent, PromptTemplate, PromptTemplateVersion
from planner_site.errors import Forbidden, NotFound
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


def _current_prompts() -> QuerySet[PromptTemplateVersion]:
    newest = PromptTemplateVersion.objects.filter(template=OuterRef("template")).order_by("-number")
    return PromptTemplateVersion.objects.filter(
        template__key__in=list(PROMPT_DEFAULTS), number=Subquery(newest.values("number")[:1])
    ).values_list("template__key", "text")


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
