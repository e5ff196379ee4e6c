"""Embeddings for knowledge search, when an admin names an embedding model
(``PLANNER_EMBEDDING_LLM``: the name of an LLM entry whose model is any litellm embedding model).

Vectors are stored unit-length in ``KnowledgeChunk.embedding``; nearness is their dot product.
Without a model nothing here runs and full-text search ranks alone.

A vector is stored packed: its float32 values, little-endian, in base64, as a JSON string
(``pack``). bench/knowledge.py, 10,000 chunks of 384 dimensions: a search reads every vector,
and with them stored as JSON lists of floats it took 4 s (parsing them) against 0.5 s packed;
``math.sumprod`` scores them in C. Vectors stored as lists before still read.

Unpacked, a source's vectors are kept per process (``VectorCache``, ~16 MB for those 10,000
chunks): a search then reads from the database only each source's chunk count and highest chunk
id (from an index), and scores. bench/knowledge.py, load 3-4: 172 ms a search before, 62 ms with
the vectors kept (the first search of a source's chunks still reads them: 174 ms). What is left is
the 3.8 million multiplications; as tuples of floats they took half as long, for 8 times the memory.
"""

from __future__ import annotations

import base64
import heapq
import math
import operator
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
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


# Vectors kept per process --------------------------------------------------------------------------

# At most this many floats kept (4 bytes each when packed, as stored now): ~32 MB, 20,000 chunks of
# 384 dimensions. Least recently searched sources go first.
KEPT_FLOATS = 8_000_000


@dataclass(frozen=True, slots=True)
class SourceVectors:
    """A source's chunk vectors as one generation of its chunks holds them."""

    generation: tuple[int, int]  # (how many chunks, highest chunk id)
    ids: array  # the chunks with a vector, in step with ``vectors``
    vectors: list[Sequence[float]]
    dims: frozenset[int]
    floats: int


class VectorCache:
    """Unpacked vectors by (database, source id), each valid for one generation of the source's
    chunks: their count and highest id. Indexing replaces every chunk of a source and chunk ids are
    never reused (AUTOINCREMENT on SQLite, sequences on PostgreSQL), so a re-indexed source has a new
    highest id and a deleted one no chunks: a kept vector is never served for another. (SQLite
    hands out an id again only after the transaction that used it rolled back, as between tests:
    tests/knowledge/conftest.py empties the cache for each test.)"""

    def __init__(self, kept_floats: int = KEPT_FLOATS) -> None:
        self.kept_floats = kept_floats
        self.floats = 0
        self._entries: OrderedDict[tuple[str, int], SourceVectors] = OrderedDict()
        self._lock = threading.Lock()  # the worker and the ASGI server's threads search at once

    def get(self, key: tuple[str, int], generation: tuple[int, int]) -> SourceVectors | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None or found.generation != generation:
                return None
            self._entries.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], entry: SourceVectors) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.floats -= old.floats
            if entry.floats > self.kept_floats:
                return  # larger than the whole cache: scored from the rows read, not kept
            while self.floats + entry.floats > self.kept_floats:
                _key, evicted = self._entries.popitem(last=False)
                self.floats -= evicted.floats
            self._entries[key] = entry
            self.floats += entry.floats

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.floats = 0

    def __len__(self) -> int:
        return len(self._entries)


vector_cache = VectorCache()


def _source_vectors(rows: Iterable[tuple[int, Any]]) -> SourceVectors:
    """A source's vectors from all its chunks' (id, stored embedding); the generation is what the
    rows themselves show, so it never names newer chunks than the vectors kept."""
    ids, vectors, count, last = array("q"), [], 0, 0
    for pk, stored in rows:
        count, last = count + 1, max(last, pk)
        vector = unpack(stored)
        if vector is not None and not isinstance(vector, array):
            try:  # a list stored before, as doubles: the same values it is scored with uncached
                vector = array("d", vector)
            except TypeError:  # not a list of numbers: no vector
                vector = None
        if vector is not None:
            ids.append(pk)
            vectors.append(vector)
    return SourceVectors((count, last), ids, vectors, frozenset(map(len, vectors)), sum(map(len, vectors)))


def _vectors_of(source_ids: Sequence[int]) -> list[SourceVectors]:
    """The vectors of ``source_ids``' chunks: kept ones while their source's chunks are unchanged,
    the others read from the database (and kept)."""
    from django.db import connection
    from django.db.models import Count, Max

    from knowledge.models import KnowledgeChunk

    chunks = KnowledgeChunk.objects.order_by()
    # From the chunks' source index alone: no row (nor its text and vector) is read.
    generations = {
        source: (count, last)
        for source, count, last in chunks.filter(source_id__in=source_ids).values("source_id")
        .annotate(count=Count("id"), last=Max("id")).values_list("source_id", "count", "last")
    }
    database = connection.settings_dict["NAME"]
    found, missing = [], []
    for source, generation in generations.items():
        kept = vector_cache.get((database, source), generation)
        if kept is None:
            missing.append(source)
        else:
            found.append(kept)
    if missing:
        rows: dict[int, list[tuple[int, Any]]] = {source: [] for source in missing}
        for source, pk, stored in chunks.filter(source_id__in=missing).values_list("source_id", "id", "embedding"):
            rows[source].append((pk, stored))
        for source, source_rows in rows.items():
            entry = _source_vectors(source_rows)
            vector_cache.put((database, source), entry)
            found.append(entry)
    return found


def _scored(query: Sequence[float], entry: SourceVectors) -> Iterator[tuple[float, int]]:
    """(score, minus the chunk id) of each of ``entry``'s vectors as long as ``query``: the
    largest first is the nearest, ties by id."""
    if entry.dims == {len(query)}:  # the usual case: every vector scored in C, no Python loop
        return zip(map(math.sumprod, repeat(query), entry.vectors), map(operator.neg, entry.ids), strict=True)
    return ((math.sumprod(query, v), -pk) for pk, v in zip(entry.ids, entry.vectors, strict=True)
            if len(v) == len(query))


def nearest_to(query: Sequence[float], source_ids: Sequence[int], limit: int) -> list[int]:
    """The ids of the chunks of ``source_ids`` whose vectors are nearest to the unit vector
    ``query``, nearest first (ties by id)."""
    scored = chain.from_iterable(_scored(query, entry) for entry in _vectors_of(source_ids))
    return [-negated for _score, negated in heapq.nlargest(limit, scored)]
