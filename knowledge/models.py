"""Data of the knowledge app: sources (an agent's or a crew's), their chunks, a crew's memories.

The full-text index lives beside the tables, per database (``knowledge.search``): an FTS5 table
kept in step by triggers on SQLite (migration 0001); on PostgreSQL a stored generated ``tsvector``
column ``search_vector`` on the chunks and the memories with a GIN index (migration 0002), which
these models do not declare: only ``knowledge.search.postgresql`` reads it, in SQL.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class KnowledgeSource(models.Model):
    class Kind(models.TextChoices):
        TEXT = "text", _("Plain text")
        MARKDOWN = "markdown", _("Markdown")
        PDF = "pdf", _("PDF")
        CSV = "csv", _("CSV")
        JSON = "json", _("JSON")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        INDEXING = "indexing", _("Extracting and indexing")
        INDEXED = "indexed", _("Indexed")
        FAILED = "failed", _("Failed")

    # Exactly one owner: an agent (only it reads the source) or a crew (all its agents do).
    agent = models.ForeignKey(
        "agents.Agent", verbose_name=_("agent"), null=True, blank=True, on_delete=models.CASCADE,
        related_name="knowledge_sources",
    )
    crew = models.ForeignKey(
        "crews.Crew", verbose_name=_("crew"), null=True, blank=True, on_delete=models.CASCADE,
        related_name="knowledge_sources",
    )
    title = models.CharField(_("title"), max_length=200)
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices)
    filename = models.CharField(_("file name"), max_length=255, blank=True)
    # What was uploaded or pasted, kept until it is indexed (and for export): the chunks are
    # what runs read.
    content = models.BinaryField(_("content"), editable=False)
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(_("error"), blank=True)
    chunk_count = models.PositiveIntegerField(_("chunks"), default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("knowledge source")
        verbose_name_plural = _("knowledge sources")
        constraints = [
            models.CheckConstraint(
                condition=Q(agent__isnull=True, crew__isnull=False) | Q(agent__isnull=False, crew__isnull=True),
                name="knowledge_source_one_owner",
            ),
        ]
        # What a task reads: a crew's or an agent's indexed sources (``readable_source_ids``).
        indexes = [
            models.Index(fields=["crew", "status"], name="knowledge_source_crew_status"),
            models.Index(fields=["agent", "status"], name="knowledge_source_agent_status"),
        ]

    def __str__(self) -> str:
        return self.title


class KnowledgeChunk(models.Model):
    source = models.ForeignKey(KnowledgeSource, on_delete=models.CASCADE, related_name="chunks")
    position = models.PositiveIntegerField()
    text = models.TextField()
    # The embedding model's vector, when one is set, stored "packed": float32, little-endian, in
    # base64 (``knowledge.embeddings.pack``; a JSON list of floats as stored before is still
    # read). None without an embedding model.
    embedding = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["source_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["source", "position"], name="knowledge_chunk_position"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}#{self.position}"


class Memory(models.Model):
    """One thing a crew learned in a run; only that crew's runs read it."""

    crew = models.ForeignKey(
        "crews.Crew", verbose_name=_("crew"), on_delete=models.CASCADE, related_name="memories"
    )
    run = models.ForeignKey(
        "crews.Run", verbose_name=_("run"), null=True, blank=True, on_delete=models.SET_NULL,
        related_name="memories",
    )
    # Whose run it came from: memory never crosses people, even on a shared crew.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE, related_name="+",
    )
    text = models.TextField(_("text"), max_length=4_000)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("memory")
        verbose_name_plural = _("memories")

    def __str__(self) -> str:
        return self.text[:60]
