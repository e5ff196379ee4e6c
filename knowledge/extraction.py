"""Text out of an uploaded file: plain text and Markdown as they are, PDF through pypdf, CSV
rows as "column: value" lines, JSON as indented JSON. A file that cannot be read raises
``Unreadable`` with a reason a person can act on."""

from __future__ import annotations

import csv
import io
import json
from pathlib import PurePath

from django.utils.translation import gettext as _

KINDS_BY_SUFFIX = {
    ".txt": "text", ".text": "text", ".log": "text",
    ".md": "markdown", ".markdown": "markdown",
    ".pdf": "pdf", ".csv": "csv", ".json": "json",
}


class Unreadable(Exception):
    """The file's text cannot be extracted; the message says why."""


def kind_for(filename: str) -> str | None:
    """The kind a file name stands for, or None when the site does not read that kind."""
    return KINDS_BY_SUFFIX.get(PurePath(filename).suffix.lower())


def _decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Unreadable(_("The file is not UTF-8 text.")) from None


def _pdf(data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Unreadable(_("The PDF is encrypted."))
        pages = [page.extract_text() or "" for page in reader.pages]
    except Unreadable:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise Unreadable(_("The PDF cannot be read: %(reason)s") % {"reason": exc}) from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise Unreadable(_("The PDF has no text to extract (a scanned document?)."))
    return text


def _csv(data: bytes) -> str:
    text = _decoded(data)
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    if not body:  # one row: nothing to name the columns with
        return ", ".join(header)
    # A row on its own line, its values named by their column: a chunk of rows stays readable.
    lines = []
    for row in body:
        pairs = [f"{name}: {value}" for name, value in zip(header, row, strict=False) if value.strip()]
        if pairs:
            lines.append("; ".join(pairs))
    return "\n".join(lines)


def _json(data: bytes) -> str:
    try:
        value = json.loads(_decoded(data))
    except ValueError as exc:
        raise Unreadable(_("The file is not valid JSON: %(reason)s") % {"reason": exc}) from None
    return json.dumps(value, indent=1, ensure_ascii=False)


def extract_text(kind: str, data: bytes) -> str:
    """The text of ``data`` read as ``kind``; raises ``Unreadable``."""
    if kind == "pdf":
        text = _pdf(data)
    elif kind == "csv":
        text = _csv(data)
    elif kind == "json":
        text = _json(data)
    else:
        text = _decoded(data)
    if "\x00" in text:
        raise Unreadable(_("The file holds binary data, not text."))
    if not text.strip():
        raise Unreadable(_("The file has no text."))
    return text
