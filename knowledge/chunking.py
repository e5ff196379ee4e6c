"""Splitting a source's text into overlapping chunks of about ``size`` characters.

Chunks end at a paragraph, a line, a sentence or a word when one is near the limit, so a fact is
rarely cut in two; ``overlap`` characters of a chunk's end start the next one, so a fact that is
cut still appears whole in one of them.
"""

from __future__ import annotations

_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


def _cut(text: str, start: int, size: int) -> int:
    end = start + size
    if end >= len(text):
        return len(text)
    window = text[start:end]
    for mark in _BREAKS:
        at = window.rfind(mark)
        if at >= size // 2:  # not so early that the chunk is mostly empty
            return start + at + len(mark)
    return end


def split_text(text: str, *, size: int, overlap: int) -> list[str]:
    """The chunks of ``text``, stripped, none empty; ``overlap`` < ``size``."""
    overlap = max(0, min(overlap, size // 2))
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = _cut(text, start, size)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        nxt = max(end - overlap, start + 1)
        # Start the overlap at a word, not mid-word.
        space = text.find(" ", nxt, end)
        start = space + 1 if space != -1 else nxt
    return chunks
