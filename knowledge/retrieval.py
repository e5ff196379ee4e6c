"""The knowledge base a crew's run reads and writes (``crews.engine.knowledge.KnowledgeBase``):
the searches of ``knowledge.selectors`` and the memory services, off the event loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from crews.engine.knowledge import Passage, Recollection
from knowledge import selectors, services
from knowledge.models import KnowledgeSource


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
    has_sources = bool(selectors.readable_source_ids(agent_id=None, crew_id=crew_id)) or (
        KnowledgeSource.objects.filter(agent_id__in=agent_ids, status=KnowledgeSource.Status.INDEXED).exists()
    )
    if not has_sources and not remembers:
        return None
    return RunKnowledge(
        crew_id=crew_id, user_id=user_id, run_id=run_id, remembers=remembers,
        knowledge_tokens=settings.PLANNER_KNOWLEDGE_TOKENS, memory_tokens=settings.PLANNER_MEMORY_TOKENS,
        has_sources=has_sources,
    )
