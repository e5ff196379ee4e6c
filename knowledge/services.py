"""Writes of the knowledge app: adding and deleting sources (indexed in the background), saving,
editing and clearing a crew's memories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django_tasks_db import DatabaseBackend

from knowledge.extraction import kind_for
from knowledge.models import KnowledgeSource, Memory
from knowledge.tasks import index_source
from planner_site.errors import DomainError

TITLE_CHARS = KnowledgeSource._meta.get_field("title").max_length
MEMORY_CHARS = 4_000


class TooLarge(DomainError):
    """A file over the size limit (413)."""

    code = "too_large"


def too_large() -> TooLarge:
    limit = settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES
    return TooLarge(
        _("The file is larger than %(mb)s MB, the limit for a knowledge source.")
        % {"mb": round(limit / 1024 / 1024, 1)},
        field="file",
    )


def _enqueue(source: KnowledgeSource) -> None:
    """Queue the indexing: with the database backend in the caller's transaction (source and task
    commit together), with any other backend after the commit (as ``crews.runs`` queues runs)."""
    if isinstance(index_source.get_backend(), DatabaseBackend):
        index_source.enqueue(source.pk)
    else:
        transaction.on_commit(lambda: index_source.enqueue(source.pk))


def _owner_field(owner: Any) -> str:
    return "agent" if owner._meta.model_name == "agent" else "crew"


@transaction.atomic
def source_create(
    *, actor: Any, owner: Any, title: str = "", filename: str = "", data: bytes, kind: str | None = None
) -> KnowledgeSource:
    """Add a source to ``owner`` (an agent: only it reads the source; a crew: all its agents do)
    and queue its indexing. The file's kind comes from its name; pasted text is plain text. At
    most ``PLANNER_KNOWLEDGE_MAX_SOURCES`` sources an owner and
    ``PLANNER_KNOWLEDGE_MAX_FILE_BYTES`` a file."""
    if len(data) > settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES:
        raise too_large()
    if kind is None:
        kind = kind_for(filename)
        if kind is None:
            raise DomainError(
                _("Upload plain text (.txt), Markdown (.md), PDF, CSV or JSON."), code="invalid", field="file"
            )
    if not data.strip():
        raise DomainError(_("The source is empty."), code="invalid", field="file" if filename else "text")
    field = _owner_field(owner)
    # Locks the owner's row: two uploads at once cannot both take the last place.
    type(owner).objects.select_for_update().filter(pk=owner.pk).first()
    most = settings.PLANNER_KNOWLEDGE_MAX_SOURCES
    if KnowledgeSource.objects.filter(**{field: owner}).count() >= most:
        raise DomainError(
            _("At most %(n)s knowledge sources each; delete one first.") % {"n": most}, code="too_many_sources"
        )
    title = (title or "").strip() or filename or _("Pasted text")
    source = KnowledgeSource.objects.create(
        **{field: owner}, title=title[:TITLE_CHARS], kind=kind, filename=filename[:255], content=data,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    _enqueue(source)
    return source


@transaction.atomic
def source_delete(*, source: KnowledgeSource) -> None:
    """Delete the source and its chunks; runs from now on no longer read it."""
    source.delete()


@transaction.atomic
def source_reindex(*, source: KnowledgeSource) -> KnowledgeSource:
    """Index the source again (after the chunking settings or the embedding model changed)."""
    KnowledgeSource.objects.filter(pk=source.pk).update(status=KnowledgeSource.Status.QUEUED, error="")
    source.status, source.error = KnowledgeSource.Status.QUEUED, ""
    _enqueue(source)
    return source


@transaction.atomic
def memories_save(*, crew_id: int, user_id: int, run_id: int | None, lines: Sequence[str]) -> list[Memory]:
    """Keep what a run of the crew learned; only this crew's runs by this person recall it."""
    return [
        Memory.objects.create(crew_id=crew_id, user_id=user_id, run_id=run_id, text=line[:MEMORY_CHARS])
        for line in lines
        if line.strip()
    ]


@transaction.atomic
def memory_update(*, memory: Memory, text: str) -> Memory:
    """A person corrects a memory; the next run recalls the new text."""
    text = text.strip()
    if not text:
        raise DomainError(_("A memory cannot be empty; delete it instead."), code="invalid", field="text")
    memory.text = text[:MEMORY_CHARS]
    memory.save(update_fields=["text", "updated_at"])
    return memory


@transaction.atomic
def memory_delete(*, memory: Memory) -> None:
    """Forget it: no run is sent it again."""
    memory.delete()


@transaction.atomic
def memories_clear(*, crew: Any, user: Any, everyone: bool = False) -> int:
    """Forget everything ``crew`` remembers from ``user``'s runs (``everyone``: an admin's clear)."""
    memories = Memory.objects.filter(crew=crew)
    if not everyone:
        memories = memories.filter(user=user)
    deleted, _detail = memories.delete()
    return deleted
