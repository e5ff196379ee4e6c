"""Full-text search over chunks and memories, one module per database behind ``backend()``:
SQLite FTS5 (BM25) on the embedded default, PostgreSQL full-text search when scaled out."""

from __future__ import annotations

import re
from types import ModuleType

from django.db import connection

# Words too common to find anything by; the rest of a task's text is the query.
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "how", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your", "do", "does", "did", "not", "no", "can", "could", "should", "would", "about", "into", "than", "then", "them", "they", "their", "there", "these", "those", "our", "we", "us", "i", "me", "my"]
)
MAX_TERMS = 40
_WORD = re.compile(r"\w+", re.UNICODE)


def terms(text: str) -> list[str]:
    """The distinct search words of ``text``, lowercased, in order, at most ``MAX_TERMS``."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if len(word) > 1 and word not in STOPWORDS and "_" not in word:
            seen.setdefault(word, None)
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)


def backend() -> ModuleType:
    if connection.vendor == "postgresql":
        from knowledge.search import postgresql

        return postgresql
    from knowledge.search import sqlite

    return sqlite
