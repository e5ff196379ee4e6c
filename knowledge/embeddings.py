"""Embeddings for knowledge search, when an admin names an embedding model
(``PLANNER_EMBEDDING_LLM``: the name of an LLM entry whose model is any litellm embedding model).

Vectors are stored unit-length in ``KnowledgeChunk.embedding``; nearness is their dot product.
Without a model nothing here runs and full-text search ranks alone.

A vector is stored packed: its float32 values, little-endian, in base64, as a JSON string
(``pack``). bench/knowledge.py, 10,000 chunks of 384 dimensions: a search reads every vector,
and with them stored as JSON lists of floats it took 4 s (parsing them) against 0.5 s packed;
``math.sumprod`` scores them in C. Vectors stored as lists before still read.
"""

from __future__ import annotations

import base64
import math
import sys
from array import array
from collections.abc import Sequence
from typing import Any

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


def pack(vector: Sequence[float]) -> str:
    """``vector`` as stored: float32, little-endian, base64."""
    values = array("f", vector)
    if sys.byteorder == "big":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def unpack(stored: Any) -> Sequence[float] | None:
    """A stored vector (packed, or a JSON list as stored before); None for anything else."""
    if isinstance(stored, str):
        values = array("f")
        try:
            values.frombytes(base64.b64decode(stored, validate=True))
        except ValueError:  # not base64, or not whole float32s
            return None
        if sys.byteorder == "big":
            values.byteswap()
        return values
    return stored if isinstance(stored, list) else None


def nearest_chunks(llm: LLMSpec, text: str, source_ids: Sequence[int], limit: int) -> list[int]:
    """The ids of the chunks of ``source_ids`` nearest to ``text``, nearest first."""
    return nearest_to(embed_texts(llm, [text])[0], source_ids, limit)


def nearest_to(query: Sequence[float], source_ids: Sequence[int], limit: int) -> list[int]:
    """The ids of the chunks of ``source_ids`` whose vectors are nearest to the unit vector
    ``query``, nearest first (ties by id)."""
    from knowledge.models import KnowledgeChunk

    rows = KnowledgeChunk.objects.filter(source_id__in=source_ids, embedding__isnull=False).values_list(
        "id", "embedding"
    )
    scored = []
    for pk, stored in rows:
        vector = unpack(stored)
        if vector is not None and len(vector) == len(query):
            scored.append((math.sumprod(query, vector), pk))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [pk for _score, pk in scored[:limit]]
