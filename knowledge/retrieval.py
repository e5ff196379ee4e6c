"""The knowledge base a crew's run reads and writes (``crews.engine.knowledge.KnowledgeBase``):
the searches of ``knowledge.selectors`` and the memory services, off the event loop."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import BooleanField, Exists, OuterRef, Value

from crews.engine.knowledge import Passage, Recollection
from knowledge import selectors, services
from knowledge.models import KnowledgeSource
from planner_site.prepared import STAND_IN_ID, Prepared


def _db(fn: Callable[..., Any]) -> Callable[..., Any]:
    return sync_to_async(fn)


@dataclass
class RunKnowledge:
    crew_id: int
    user_id: int
    run_id: int | None
    remembers: bool
    knowledge_tokens: int
    memory_tokens: int
    has_sources: bool = True  # none at the run's start: no search at all (most crews)

    async def passages(self, *, agent_key: str | None, query: str) -> Sequence[Passage]:
        if not self.has_sources:
            return []
        agent_id = int(agent_key) if agent_key and agent_key.isdigit() else None
        hits = await _db(selectors.knowledge_search)(agent_id=agent_id, crew_id=self.crew_id, text=query)
        return [Passage(source_id=h.source_id, source=h.source_title, text=h.text) for h in hits]

    async def memories(self, *, query: str) -> Sequence[Recollection]:
        if not self.remembers:
            return []
        found = await _db(selectors.memory_search)(crew_id=self.crew_id, user_id=self.user_id, text=query)
        return [Recollection(id=m.pk, text=m.text) for m in found]

    async def titles(self, *, agent_key: str | None) -> Sequence[str]:
        if not self.has_sources:
            return []
        agent_id = int(agent_key) if agent_key and agent_key.isdigit() else None
        return await _db(selectors.source_titles)(agent_id=agent_id, crew_id=self.crew_id)

    async def save(self, *, task_key: str, lines: Sequence[str]) -> Sequence[Recollection]:
        saved = await _db(services.memories_save)(
            crew_id=self.crew_id, user_id=self.user_id, run_id=self.run_id, lines=lines
        )
        return [Recollection(id=m.pk, text=m.text) for m in saved]


def run_knowledge(*, crew_id: int, user_id: int, run_id: int | None, remembers: bool,
                  agent_ids: Sequence[int]) -> RunKnowledge | None:
    """What a run of the crew reads; None when it has neither sources nor memory (no hook runs)."""
    _crew_remembers, has_sources = _memory_and_sources(crew_id, agent_ids)
    return _knowledge(crew_id, user_id, run_id, remembers, has_sources)


def run_start_knowledge(*, crew_id: int, user_id: int, run_id: int,
                        agent_ids: Sequence[int]) -> RunKnowledge | None:
    """``run_knowledge`` for a run of the crew as it starts, with the crew's own memory setting,
    read in the same query: every run asks both."""
    remembers, has_sources = _memory_and_sources(crew_id, agent_ids)
    return _knowledge(crew_id, user_id, run_id, remembers, has_sources)


def _knowledge(crew_id: int, user_id: int, run_id: int | None, remembers: bool,
               has_sources: bool) -> RunKnowledge | None:
    if not has_sources and not remembers:
        return None
    return RunKnowledge(
        crew_id=crew_id, user_id=user_id, run_id=run_id, remembers=remembers,
        knowledge_tokens=settings.PLANNER_KNOWLEDGE_TOKENS, memory_tokens=settings.PLANNER_MEMORY_TOKENS,
        has_sources=has_sources,
    )


def _memory_and_sources(crew_id: int, agent_ids: Sequence[int]) -> tuple[bool, bool]:
    """Whether the crew remembers, and whether it or its agents have indexed sources: one read."""
    row = _start_read(len(agent_ids)).rows(crew=crew_id, **_agent_values(agent_ids))
    remembers, crew_sources, agent_sources = row[0] if row else (False, False, False)
    return bool(remembers), bool(crew_sources or agent_sources)


def _agent_values(agent_ids: Sequence[int]) -> dict[str, int]:
    return {f"agent{i}": agent_id for i, agent_id in enumerate(agent_ids)}


@functools.cache
def _start_read(agents: int) -> Prepared:
    """The crew's memory flag and whether it and ``agents`` agents have indexed sources, as the
    queries of ``run_knowledge`` ask it (unordered: the (crew, status) and (agent, status) indexes
    answer them), compiled once per number of agents (``planner_site.prepared``)."""
    from crews.models import Crew

    def build(crew: int, **agent_ids: int) -> Any:
        indexed = KnowledgeSource.objects.filter(status=KnowledgeSource.Status.INDEXED).order_by()
        of_agents = (Exists(indexed.filter(agent_id__in=list(agent_ids.values()))) if agent_ids
                     else Value(False, BooleanField()))
        return Crew.objects.filter(pk=crew).order_by().values_list(
            "memory", Exists(indexed.filter(crew_id=OuterRef("pk"))), of_agents)

    return Prepared(build, crew=STAND_IN_ID, **_agent_values([STAND_IN_ID + 1 + i for i in range(agents)]))
