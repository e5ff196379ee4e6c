"""Reads of the knowledge app: sources and memories a person may see, and the one search that
ranks chunks (full text, fused with embeddings when a model is set) for runs and pages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from agents.engine.llm import LLMError
from agents.selectors import agent_get
from crews.selectors import crew_get
from knowledge import embeddings
from knowledge.models import KnowledgeChunk, KnowledgeSource, Memory
from knowledge.search import backend, terms
from planner_site.errors import NotFound
from planner_site.roles import is_admin

# Reciprocal rank fusion's constant (Cormack et al., 2009): a hit's score is the sum over the
# rankings of 1 / (RRF_K + rank).
RRF_K = 60


def source_list(*, owner: Any) -> QuerySet[KnowledgeSource]:
    """The sources of ``owner`` (an ``Agent`` or a ``Crew`` the caller may see)."""
    field = "agent" if owner._meta.model_name == "agent" else "crew"
    return KnowledgeSource.objects.filter(**{field: owner}).defer("content")


def source_owner(*, user: Any, source: KnowledgeSource, for_write: bool = False) -> Any:
    """The agent or crew ``source`` belongs to, checked as that owner is (NotFound, Forbidden)."""
    if source.agent_id is not None:
        return agent_get(user=user, agent_id=source.agent_id, for_write=for_write)
    return crew_get(user=user, crew_id=source.crew_id, for_write=for_write)


def source_get(*, user: Any, source_id: int, for_write: bool = False) -> KnowledgeSource:
    source = KnowledgeSource.objects.defer("content").filter(pk=source_id).first()
    if source is None:
        raise NotFound(_("No knowledge source with id %(id)s.") % {"id": source_id})
    try:
        source_owner(user=user, source=source, for_write=for_write)
    except NotFound:
        raise NotFound(_("No knowledge source with id %(id)s.") % {"id": source_id}) from None
    return source


def memory_list(*, user: Any, crew: Any) -> QuerySet[Memory]:
    """What ``crew`` remembers from ``user``'s runs (an admin sees everyone's)."""
    memories = Memory.objects.filter(crew=crew).select_related("run")
    return memories if is_admin(user) else memories.filter(user=user)


def memory_get(*, user: Any, memory_id: int, for_write: bool = False) -> Memory:
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None or not (is_admin(user) or memory.user_id == user.pk):
        raise NotFound(_("No memory with id %(id)s.") % {"id": memory_id})
    try:
        crew_get(user=user, crew_id=memory.crew_id, for_write=for_write)
    except NotFound:
        raise NotFound(_("No memory with id %(id)s.") % {"id": memory_id}) from None
    return memory


# Search ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hit:
    chunk_id: int
    source_id: int
    source_title: str
    text: str


def readable_source_ids(*, agent_id: int | None, crew_id: int | None) -> list[int]:
    """The indexed sources a task of ``agent_id`` in ``crew_id`` reads: the agent's own and the
    crew's. A source being indexed or failed is never read."""
    owners = Q()
    if agent_id is not None:
        owners |= Q(agent_id=agent_id)
    if crew_id is not None:
        owners |= Q(crew_id=crew_id)
    if not owners:
        return []
    # Unordered, so the (crew, status) and (agent, status) indexes answer it without reading the
    # rows, whose content blobs SQLite would walk (5.4 -> 0.14 ms per task at 10k chunks, bench/knowledge.py).
    rows = KnowledgeSource.objects.filter(owners, status=KnowledgeSource.Status.INDEXED).order_by()
    return list(rows.values_list("id", flat=True))


def source_titles(*, agent_id: int | None, crew_id: int | None) -> list[str]:
    """The titles of the sources ``readable_source_ids`` gives, oldest first: what the crew
    planner and a hierarchical crew's manager are told a task's agent can read."""
    ids = readable_source_ids(agent_id=agent_id, crew_id=crew_id)
    return list(KnowledgeSource.objects.filter(pk__in=ids).values_list("title", flat=True))


def fuse(rankings: Sequence[Sequence[int]], *, k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion of best-first id lists."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: (-scores[item], item))


def chunk_search(*, source_ids: Sequence[int], text: str, limit: int) -> list[Hit]:
    """The best chunks of ``source_ids`` for ``text``: BM25 (or PostgreSQL's rank) alone, or
    fused with the embedding model's nearest chunks when one is set."""
    if not source_ids:
        return []
    pool = max(limit * 4, 20)
    ranked = backend().chunk_ids(terms(text), source_ids, pool)
    model = embeddings.embedding_llm()
    if model is not None:
        try:
            nearest = embeddings.nearest_chunks(model, text, source_ids, pool)
        except LLMError:
            nearest = []  # the embedding model is down: full text still answers
        ranked = fuse([ranked, nearest])
    ids = ranked[:limit]
    rows = {
        c.pk: c
        for c in KnowledgeChunk.objects.filter(pk__in=ids).select_related("source").only(
            "id", "text", "source_id", "source__title"
        )
    }
    return [Hit(i, rows[i].source_id, rows[i].source.title, rows[i].text) for i in ids if i in rows]


def knowledge_search(*, agent_id: int | None, crew_id: int | None, text: str, limit: int | None = None) -> list[Hit]:
    """What a task of ``agent_id`` in ``crew_id`` finds for ``text``: its agent's and its crew's
    sources only."""
    ids = readable_source_ids(agent_id=agent_id, crew_id=crew_id)
    return chunk_search(source_ids=ids, text=text, limit=limit or settings.PLANNER_KNOWLEDGE_TOP_K)


def memory_search(*, crew_id: int, user_id: int, text: str, limit: int = 5) -> list[Memory]:
    """The memories of ``crew_id`` from ``user_id``'s runs that best match ``text``."""
    ids = backend().memory_ids(terms(text), crew_id, user_id, limit)
    rows = {m.pk: m for m in Memory.objects.filter(pk__in=ids)}
    return [rows[i] for i in ids if i in rows]
