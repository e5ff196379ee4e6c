"""Background tasks (django.tasks) of the knowledge app: indexing a source."""

from __future__ import annotations

from django.tasks import task

from knowledge import indexing


@task()
def index_source(source_id: int) -> None:
    indexing.source_index(source_id=source_id)
