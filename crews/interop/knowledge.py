"""Knowledge sources in an exported zip (issue #19): each source's file under ``knowledge/``, the
folder a CrewAI project keeps knowledge files in (its file sources name them relative to it),
listed by title and file name in the ``crew_planner`` object of its agent or of the crew. A crew's
memories stay behind: they are what its runs learned for the people who ran them.

Importing reads only the files the project lists, each once and checked as an upload is (size,
kind, count per agent or crew), and creates the sources with their indexing queued; a dry run
checks them the same way and creates nothing.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.db.models.functions import Length
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from crews.interop.problems import ImportRejected, Problem
from knowledge.extraction import kind_for
from knowledge.models import KnowledgeSource
from knowledge.services import source_create
from planner_site.errors import DomainError

FOLDER = "knowledge"
# What one zip may carry in its knowledge folder, uncompressed: a zip that inflates past this is
# refused before anything is read (the upload itself is at most ``sources.MAX_PROJECT_BYTES``),
# and an import stops reading there. An export carries at most as much.
MAX_KNOWLEDGE_FILES = 500
MAX_KNOWLEDGE_BYTES = 100_000_000
SUFFIXES = {"text": ".txt", "markdown": ".md", "pdf": ".pdf", "csv": ".csv", "json": ".json"}


def top_folder(paths: Iterable[str]) -> str:
    """The one folder every file of a zip sits in (a zipped project folder), or ""."""
    tops = {parts[0] if len(parts) > 1 else "" for parts in (PurePosixPath(p).parts for p in paths)}
    return tops.pop() if len(tops) == 1 else ""


def in_folder(path: str, top: str = "") -> str | None:
    """``path``'s name inside the project's ``knowledge/`` folder: at the zip's top, or under its
    one ``top`` folder; None for any other file (``src/knowledge/config/...`` is a project file of
    a crew named "knowledge")."""
    parts = PurePosixPath(path).parts
    start = (top,) if top else ()
    if len(parts) < len(start) + 2 or parts[:len(start) + 1] != (*start, FOLDER):
        return None
    return "/".join(parts[len(start) + 1:])


# Exporting ---------------------------------------------------------------------------------------


def _file_name(source: KnowledgeSource, taken: set[str]) -> str:
    """A name for the source's file, unique in the zip: its uploaded name, else its title."""
    suffix = SUFFIXES.get(source.kind, ".txt")
    name = PurePosixPath(source.filename.replace("\\", "/")).name if source.filename else ""
    stem, ext = (PurePosixPath(name).stem, PurePosixPath(name).suffix) if name else (source.title, suffix)
    stem = re.sub(r"[^\w.-]+", "_", stem).strip("._") or "source"
    candidate, number = f"{stem}{ext}", 2
    while candidate.lower() in taken:
        candidate, number = f"{stem}_{number}{ext}", number + 1
    taken.add(candidate.lower())
    return candidate


@dataclass
class ExportedSources:
    """What an export carries of the sources: each owner's ``knowledge`` list, the zip's
    ``knowledge/`` files (path, source id), and the sources left out (title, owner's name) past the
    limit."""

    listed: dict[Any, list[dict[str, str]]]
    files: list[tuple[str, int]]
    left_out: list[tuple[str, str]]

    def contents(self) -> Iterator[tuple[str, bytes | None]]:
        """Each file's path and content, read one at a time as the zip is written: the files may
        hold up to ``MAX_KNOWLEDGE_BYTES`` together. None for a source deleted since the export
        began: its file is left out, and ``drop`` takes it off its owner's list."""
        for path, source_id in self.files:
            content = KnowledgeSource.objects.filter(pk=source_id).values_list("content", flat=True).first()
            yield path, None if content is None else bytes(content)

    def drop(self, path: str) -> None:
        """Take the file at ``path`` off its owner's list (its source is gone)."""
        name = path.removeprefix(f"{FOLDER}/")
        for owner, entries in list(self.listed.items()):
            self.listed[owner] = [entry for entry in entries if entry["file"] != name]
            if not self.listed[owner]:
                del self.listed[owner]


def export_sources(owners: Iterable[Any]) -> ExportedSources:
    """For each owner (the crew, its agents) the ``knowledge`` list its ``crew_planner`` object
    gets, and the zip's ``knowledge/`` files: every source, indexed or not, as it was given, while
    they stay within ``MAX_KNOWLEDGE_BYTES`` (an import takes no more); the rest are left out."""
    taken: set[str] = set()
    found = ExportedSources({}, [], [])
    total = 0
    for owner in owners:
        # Sizes first: a source past the limit is never loaded.
        sources = owner.knowledge_sources.defer("content").annotate(size=Length("content"))
        for source in sources.order_by("created_at", "id"):
            if total + source.size > MAX_KNOWLEDGE_BYTES:
                found.left_out.append((source.title, getattr(owner, "name", "")))
                continue
            total += source.size
            name = _file_name(source, taken)
            found.listed.setdefault(owner, []).append({"title": source.title, "file": name})
            found.files.append((f"{FOLDER}/{name}", source.pk))
    return found


LEFT_OUT_FILE = "KNOWLEDGE_LEFT_OUT.txt"


def left_out_note(left_out: list[tuple[str, str]]) -> str:
    """The note an export carries when sources were left out, naming each one and its owner."""
    lines = [_("These knowledge sources are not in this zip: with them it would hold more than %(mb)s MB. "
               "Add them again after importing it.") % {"mb": MAX_KNOWLEDGE_BYTES // 1_000_000}, ""]
    lines += [f"- {title} ({owner})" for title, owner in left_out]
    return "\n".join(lines) + "\n"


# Importing ---------------------------------------------------------------------------------------


@dataclass
class SourceRef:
    """One source a project lists: its title and file, and where the listing is (for problems)."""

    title: str
    file: str
    where: Problem


class KnowledgeFiles:
    """The ``knowledge/`` files of an uploaded zip (or of an earlier upload, kept by the import
    page), by name in the folder; read only when the project lists them."""

    def __init__(self, sizes: Mapping[str, int], read: Callable[[str], bytes], paths: Mapping[str, str]) -> None:
        self.sizes = dict(sizes)
        self.paths = dict(paths)  # each name's path in the zip, kept as it was by the import page
        # Files the import page could not keep: named, so the import asks for the zip again.
        self.dropped: set[str] = set()
        self._read = read
        self.check_sizes()

    def check_sizes(self) -> None:
        if len(self.sizes) > MAX_KNOWLEDGE_FILES or sum(self.sizes.values()) > MAX_KNOWLEDGE_BYTES:
            raise ImportRejected([Problem(FOLDER, None, "", too_much())])

    @classmethod
    def from_zip(cls, data: bytes) -> KnowledgeFiles:
        infos: dict[str, zipfile.ZipInfo] = {}
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                listed = [info for info in archive.infolist()
                          if not info.is_dir() and "__MACOSX" not in info.filename.split("/")]
                top = top_folder(info.filename for info in listed)
                for info in listed:
                    name = in_folder(info.filename, top)
                    if name:
                        infos.setdefault(name, info)
        except (zipfile.BadZipFile, ValueError):
            pass  # the project's own reading says what is wrong with the zip

        def read(name: str) -> bytes:
            try:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    return archive.read(infos[name])
            except (zipfile.BadZipFile, OSError, RuntimeError, ValueError):
                raise DomainError(_("This file cannot be read from the zip.")) from None

        return cls({name: info.file_size for name, info in infos.items()}, read,
                   {name: info.filename for name, info in infos.items()})

    @classmethod
    def from_kept(cls, kept: Mapping[str, str]) -> KnowledgeFiles:
        """The files ``kept_texts`` wrote into the import page's hidden field."""
        files: dict[str, bytes] = {}
        paths: dict[str, str] = {}
        dropped: dict[str, str] = {}
        top = top_folder(kept)
        for path, text in kept.items():
            name = in_folder(path, top)
            if name and text == DROPPED:
                dropped[name] = path
            elif name and text.startswith(KEPT_PREFIX):
                try:
                    files[name] = base64.b64decode(text.removeprefix(KEPT_PREFIX), validate=True)
                except (binascii.Error, ValueError):
                    continue  # not this page's: the file is missing, and the import says so
                paths[name] = path
        found = cls({name: len(data) for name, data in files.items()}, files.__getitem__, {**dropped, **paths})
        found.dropped = set(dropped) - set(files)
        return found

    def read(self, name: str) -> bytes:
        """The file's bytes; DomainError when it is missing, too large or cannot be read."""
        size = self.sizes.get(name)
        if size is None and name in self.dropped:
            raise DomainError(_("This file was too large to keep between Preview and Import: choose the zip "
                                "again, then press Import."))
        if size is None:
            raise DomainError(_("This file is not in the zip's knowledge folder."))
        if size > settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES:
            raise DomainError(_("The file is larger than %(mb)s MB, the limit for a knowledge source.")
                              % {"mb": round(settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES / 1024 / 1024, 1)})
        return self._read(name)


def too_much() -> str:
    return _("The knowledge folder is too large: at most %(n)s files and %(mb)s MB in all.") % {
        "n": MAX_KNOWLEDGE_FILES, "mb": MAX_KNOWLEDGE_BYTES // 1_000_000}


# The import page keeps an upload's files between Preview and Import in a hidden field, as text;
# a knowledge file goes there as base64, while the page's post stays small enough to be read:
# within Django's DATA_UPLOAD_MAX_MEMORY_SIZE (the page's other fields in KEPT_MARGIN).
KEPT_PREFIX = "base64:"
DROPPED = ""  # a file named but not kept
MAX_KEPT_BYTES = 1_500_000
KEPT_MARGIN = 64_000


def _kept_size(path: str, size: int) -> int:
    """What one kept file adds to the hidden field's JSON: its quoted path and base64 text."""
    return len(path.encode()) + len(KEPT_PREFIX) + 4 * -(-size // 3) + 6


def kept_texts(files: KnowledgeFiles, texts: Mapping[str, str]) -> dict[str, str]:
    """The knowledge files as the import page keeps them (their path in the zip → base64) beside
    the project's ``texts``; when the page could not post them back, only their paths (``DROPPED``),
    and an import without the zip then asks for it naming each one."""
    room = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if room is not None:
        room -= len(json.dumps(dict(texts), ensure_ascii=False).encode()) + KEPT_MARGIN
    wanted = {name: size for name, size in files.sizes.items() if size <= settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES}
    needed = sum(_kept_size(files.paths.get(name, name), size) for name, size in wanted.items())
    kept = {files.paths.get(name, f"{FOLDER}/{name}"): DROPPED for name in files.dropped}
    if sum(wanted.values()) > MAX_KEPT_BYTES or (room is not None and needed > room):
        return {**kept, **{files.paths.get(name, f"{FOLDER}/{name}"): DROPPED for name in files.sizes}}
    for name in wanted:
        try:
            kept[files.paths.get(name, f"{FOLDER}/{name}")] = KEPT_PREFIX + base64.b64encode(files.read(name)).decode()
        except DomainError:
            continue
    return kept


def read_listing(value: Any, where: Callable[[int], Problem], fail: Callable[[str], None]) -> list[SourceRef]:
    """A ``crew_planner.knowledge`` list: ``[{title, file}]``; ``where`` places its n-th item,
    ``fail`` reports a bad shape."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(item, dict) and isinstance(item.get("file"), str) and item["file"].strip()
        and isinstance(item.get("title", ""), str)
        for item in value
    ):
        fail(_('List the knowledge sources as {"title": "...", "file": "..."}, the file in the knowledge folder.'))
        return []
    return [SourceRef(item.get("title") or item["file"], item["file"].strip(), where(i)) for i, item in enumerate(value)]


def _check(data: bytes, filename: str) -> None:
    """What ``source_create`` refuses in a file, for a dry run that creates nothing."""
    if kind_for(filename) is None:
        raise DomainError(_("Upload plain text (.txt), Markdown (.md), PDF, CSV or JSON."), code="invalid")
    if not data.strip():
        raise DomainError(_("The source is empty."), code="invalid")


def import_sources(
    *, actor: Any, owners: Iterable[tuple[Any, str, list[SourceRef]]], files: KnowledgeFiles | None,
    problems: list[Problem], notices: list[str], dry_run: bool = False,
) -> None:
    """Create each owner's (owner, its label, its refs) sources from the zip's files (indexing
    queued); each file that cannot be one adds a problem naming it, as does a file listed twice
    (one small zip would store it many times) or one read past ``MAX_KNOWLEDGE_BYTES`` in all. A
    dry run checks the files as ``source_create`` would and creates nothing. Without files (a
    project given as text) the sources are left out, and a notice says so."""
    first: dict[str, SourceRef] = {}
    total = 0
    for owner, label, refs in owners:
        if refs and files is None:
            notices.append(ngettext(
                "%(owner)s: %(n)s knowledge source is left out: only a zip of the project carries its file.",
                "%(owner)s: %(n)s knowledge sources are left out: only a zip of the project carries their files.",
                len(refs),
            ) % {"owner": label, "n": len(refs)})
        if not refs or files is None:
            continue
        added = []
        for number, ref in enumerate(refs):
            path = f"{FOLDER}/{ref.file}"
            try:
                if ref.file in first:
                    raise DomainError(_("This file is listed more than once (first at %(where)s): a file is one "
                                        "source, of the crew or of one agent.") % {"where": first[ref.file].where.place()})
                first[ref.file] = ref
                if total + files.sizes.get(ref.file, 0) > MAX_KNOWLEDGE_BYTES:
                    raise DomainError(too_much())
                data = files.read(ref.file)
                total += len(data)
                filename = PurePosixPath(ref.file).name
                if not dry_run:
                    source_create(actor=actor, owner=owner, title=ref.title, filename=filename, data=data)
                elif number >= settings.PLANNER_KNOWLEDGE_MAX_SOURCES:
                    raise DomainError(_("At most %(n)s knowledge sources each; delete one first.")
                                      % {"n": settings.PLANNER_KNOWLEDGE_MAX_SOURCES})
                else:
                    _check(data, filename)
            except DomainError as exc:
                problems.append(Problem(path, None, ref.where.key, exc.detail))
                continue
            added.append(ref.title)
        if added:
            notices.append(ngettext(
                "%(owner)s: %(n)s knowledge source added (%(titles)s); it is indexed after the import.",
                "%(owner)s: %(n)s knowledge sources added (%(titles)s); they are indexed after the import.",
                len(added),
            ) % {"owner": label, "n": len(added), "titles": ", ".join(added)})
