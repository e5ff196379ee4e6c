"""Embeddings for knowledge search, when an admin names an embedding model
(``PLANNER_EMBEDDING_LLM``: the name of an LLM entry whose model is any litellm embedding model).

Vectors are stored unit-length in ``KnowledgeChunk.embedding``; nearness is their dot product.
Without a model nothing here runs and full-text search ranks alone.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

from django.conf import settings

from agents.bridge import llm_spec
from agents.engine.embeddings import embed
from agents.engine.specs import LLMSpec
from agents.models import LLM


def embedding_llm() -> LLMSpec | None:
    name = settings.PLANNER_EMBEDDING_LLM
    if not name:
        return None
    row = LLM.objects.filter(name=name).first()
    return llm_spec(row) if row is not None else None


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def embed_texts(llm: LLMSpec, texts: Sequence[str]) -> list[list[float]]:
    """Unit vectors of ``texts``; raises ``agents.engine.llm.LLMError``."""
    return [_unit(v) for v in embed(llm, texts)]


def nearest_chunks(llm: LLMSpec, text: str, source_ids: Sequence[int], limit: int) -> list[int]:
    """The ids of the chunks of ``source_ids`` nearest to ``text``, nearest first."""
    from knowledge.models import KnowledgeChunk

    query = embed_texts(llm, [text])[0]
    rows = KnowledgeChunk.objects.filter(source_id__in=source_ids, embedding__isnull=False).values_list(
        "id", "embedding"
    )
    scored = [
        (sum(map(operator.mul, query, vector)), pk)
        for pk, vector in rows
        if isinstance(vector, list) and len(vector) == len(query)
    ]
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [pk for _score, pk in scored[:limit]]
