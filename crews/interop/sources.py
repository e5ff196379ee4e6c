"""Reading CrewAI projects: classic YAML (``config/agents.yaml``, ``config/tasks.yaml``) and the JSONC
layout (``crew.jsonc`` + ``agents/<name>.jsonc``), as text, loose files or a zip of either.

The readers only parse (``crews.interop.parsing``: plain JSON, the line of each key) and find the
project's entries, so that every later problem can name its place; what the keys mean is
``crews.interop.fields``' business.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from django.utils.translation import gettext as _

from crews.interop.knowledge import KnowledgeFiles, in_folder, top_folder
from crews.interop.parsing import Document, parse_jsonc, parse_yaml
from crews.interop.plain import Path, plain_json
from crews.interop.problems import ImportRejected, Problem

YAML = "crewai-yaml"
JSONC = "crew-jsonc"
LAYOUTS = (YAML, JSONC)

# A crew project is a few small text files; anything far larger is not one.
MAX_PROJECT_BYTES = 5_000_000
MAX_PROJECT_FILES = 500


def too_large() -> str:
    """Why uploads over MAX_PROJECT_BYTES are refused, before they are read."""
    return _("These files are too large to be a crew project: at most %(n)s MB.") % {
        "n": MAX_PROJECT_BYTES // 1_000_000}


@dataclass
class Entry:
    """One agent, task or the crew: its settings and where they were read."""

    key: str
    data: dict[str, Any]
    doc: Document
    path: Path = ()

    def problem(self, message: str, *sub: str | int) -> Problem:
        key = ".".join(str(p) for p in ((self.key,) if self.key else ()) + sub)
        return Problem(self.doc.file, self.doc.line(self.path + sub), key, message)


@dataclass
class Project:
    layout: str
    crew: Entry
    agents: list[Entry]
    tasks: list[Entry]
    # The zip's knowledge files; None when the project came as texts, which cannot carry them.
    knowledge: KnowledgeFiles | None = None


# Projects ----------------------------------------------------------------------------------------


def _entries(doc: Document | None, problems: list[Problem], *, required: bool) -> list[Entry]:
    """The ``key: {settings}`` mapping of agents.yaml or tasks.yaml, in file order."""
    if doc is None:
        return []
    if doc.data is None:
        if required:
            problems.append(Problem(doc.file, None, "", _("This file is empty.")))
        return []
    if not isinstance(doc.data, dict):
        problems.append(Problem(doc.file, 1, "", _("This file must map each key to its settings.")))
        return []
    entries = []
    for key, value in doc.data.items():
        entry = Entry(str(key), value if isinstance(value, dict) else {}, doc, (str(key),))
        if not isinstance(value, dict):
            problems.append(entry.problem(_("Give this entry's settings as a mapping (key: value).")))
            continue
        entries.append(entry)
    return entries


def project_from_yaml(
    *,
    agents_yaml: str,
    tasks_yaml: str,
    crew: Mapping[str, Any] | str | None = None,
    files: tuple[str, str, str] = ("config/agents.yaml", "config/tasks.yaml", "config/crew.yaml"),
    default_name: str = "",
) -> Project:
    """Classic CrewAI: agents and tasks keyed by name, tasks in file order. The crew's settings
    (which CrewAI keeps in ``crew.py``) come from ``crew``: a mapping (an API body) or the text of
    our ``config/crew.yaml``."""
    problems: list[Problem] = []
    agents_doc = parse_yaml(files[0], agents_yaml, problems)
    tasks_doc = parse_yaml(files[1], tasks_yaml, problems)
    if isinstance(crew, str):
        crew_doc = parse_yaml(files[2], crew, problems)
    else:  # an API body's object: JSON already, checked as any file is
        crew_doc = Document("crew", None)
        crew_doc.data = plain_json(dict(crew) if crew is not None else None, file="crew",
                                   line=crew_doc.line, problems=problems)
    agents = _entries(agents_doc, problems, required=False)
    tasks = _entries(tasks_doc, problems, required=True)
    crew_data = crew_doc.data if crew_doc is not None else None
    if crew_data is not None and not isinstance(crew_data, dict):
        problems.append(Problem(crew_doc.file, 1, "", _("The crew's settings must be a mapping (key: value).")))  # type: ignore[union-attr]
        crew_data = None
    crew_entry = Entry("", dict(crew_data or {}), crew_doc or Document(files[2], None))
    if default_name:
        crew_entry.data.setdefault("name", default_name)
    if problems:
        raise ImportRejected(problems)
    return Project(YAML, crew_entry, agents, tasks)


def project_from_jsonc(
    *, crew_jsonc: str, agents: Mapping[str, str], crew_file: str = "crew.jsonc",
    agent_files: Mapping[str, str] | None = None,
) -> Project:
    """The JSONC layout: ``crew.jsonc`` lists the agents (each in ``agents/<name>.jsonc``, or
    inline) and the tasks, in order. ``agents`` maps an agent's name to its file's text."""
    problems: list[Problem] = []
    crew_doc = parse_jsonc(crew_file, crew_jsonc, problems)
    if crew_doc is None:
        raise ImportRejected(problems)
    if not isinstance(crew_doc.data, dict):
        raise ImportRejected([Problem(crew_file, 1, "", _("crew.jsonc must hold one object."))])
    data = dict(crew_doc.data)
    crew_entry = Entry("", data, crew_doc)
    agent_entries = _jsonc_agents(crew_entry, data.pop("agents", None), agents, agent_files or {}, problems)
    task_entries = _jsonc_tasks(crew_entry, data.pop("tasks", None), problems)
    if problems:
        raise ImportRejected(problems)
    return Project(JSONC, crew_entry, agent_entries, task_entries)


def _jsonc_agents(
    crew: Entry, listed: Any, texts: Mapping[str, str], files: Mapping[str, str], problems: list[Problem]
) -> list[Entry]:
    entries: list[Entry] = []
    if listed is None:
        return entries
    if isinstance(listed, dict):  # inline: {name: {role, goal, ...}}
        items = [(str(name), value, ("agents", str(name))) for name, value in listed.items()]
    elif isinstance(listed, list):
        items = []
        for index, item in enumerate(listed):
            if isinstance(item, dict) and isinstance(item.get("name"), str):  # inline: [{name, role, ...}]
                items.append((item["name"], {k: v for k, v in item.items() if k != "name"}, ("agents", index)))
            elif isinstance(item, str):
                items.append((item, None, ("agents", index)))
            else:
                problems.append(crew.problem(_("List each agent by its name."), "agents", index))
    else:
        problems.append(crew.problem(_("List the agents by name."), "agents"))
        return entries
    seen: set[str] = set()
    for name, inline, path in items:
        if name in seen:  # a second agent under one key would be created, and never used
            problems.append(crew.problem(_("Two agents have this key; give each agent its own."), *path))
            continue
        seen.add(name)
        if inline is not None:
            if isinstance(inline, dict):
                entries.append(Entry(name, inline, crew.doc, path))
            else:
                problems.append(crew.problem(_("Give this agent's settings as an object."), *path))
            continue
        file = files.get(name, f"agents/{name}.jsonc")
        if name not in texts:
            problems.append(crew.problem(_("There is no file %(file)s for this agent.") % {"file": file}, *path))
            continue
        doc = parse_jsonc(file, texts[name], problems)
        if doc is None:
            continue
        if not isinstance(doc.data, dict):
            problems.append(Problem(file, 1, "", _("An agent's file must hold one object.")))
            continue
        entries.append(Entry(name, doc.data, doc))
    return entries


def _jsonc_tasks(crew: Entry, listed: Any, problems: list[Problem]) -> list[Entry]:
    if not isinstance(listed, list) or not listed:
        problems.append(crew.problem(_("List the crew's tasks, in order."), "tasks"))
        return []
    entries = []
    for index, task in enumerate(listed):
        if not isinstance(task, dict):
            problems.append(crew.problem(_("Give this task's settings as an object."), "tasks", index))
            continue
        name = task.get("name")
        key = name if isinstance(name, str) and name.strip() else f"task_{index + 1}"
        entries.append(Entry(key, task, crew.doc, ("tasks", index)))
    return entries


# Files and zips ------------------------------------------------------------------------------------


def read_zip(data: bytes) -> dict[str, bytes]:
    """The files of a zip, in its order (folders, hidden files and macOS' extras left out)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        raise ImportRejected([Problem("file", None, "", _("This is not a zip file."))]) from None
    with archive:
        listed = [info for info in archive.infolist()
                  if not info.is_dir() and "__MACOSX" not in info.filename.split("/")]
        top = top_folder(info.filename for info in listed)
        infos = [
            info for info in listed
            if not PurePosixPath(info.filename).name.startswith(".")
            and PurePosixPath(info.filename).suffix.lower() in (".yaml", ".yml", ".jsonc", ".json")
            and in_folder(info.filename, top) is None  # a knowledge source's file (JSON, say) is no project file
        ]
        if len(infos) > MAX_PROJECT_FILES or sum(i.file_size for i in infos) > MAX_PROJECT_BYTES:
            raise ImportRejected([Problem("file", None, "", _("This zip is too large to be a crew project."))])
        try:
            return {info.filename: archive.read(info) for info in infos}
        except (zipfile.BadZipFile, OSError, RuntimeError, ValueError):
            raise ImportRejected([Problem("file", None, "", _("This zip cannot be read."))]) from None


def _text(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportRejected([Problem(name, None, "", _("This file is not UTF-8 text."))]) from None


def project_texts(files: Mapping[str, bytes]) -> dict[str, str]:
    """The text of each project file uploaded (a zip opened), by path, in upload order."""
    if len(files) == 1 and next(iter(files)).lower().endswith(".zip"):
        files = read_zip(next(iter(files.values())))
    if len(files) > MAX_PROJECT_FILES or sum(len(data) for data in files.values()) > MAX_PROJECT_BYTES:
        raise ImportRejected([Problem("file", None, "", _("These files are too large to be a crew project."))])
    return {name: _text(name, data) for name, data in files.items()}


def _named(files: Mapping[str, bytes], *basenames: str) -> list[str]:
    """The paths whose file name is one of ``basenames``, shallowest first, then in upload order."""
    found = [p for p in files if PurePosixPath(p).name.lower() in basenames]
    return sorted(found, key=lambda p: p.count("/"))


def _folder_name(path: str) -> str:
    """A default crew name from where the project sits (``src/research_crew/config`` → research_crew)."""
    parts = [p for p in PurePosixPath(path).parent.parts if p not in ("config", "src", ".")]
    return parts[-1] if parts else ""


def project_knowledge(files: Mapping[str, bytes]) -> KnowledgeFiles | None:
    """The knowledge files an upload carries: a zip's ``knowledge/`` folder; None for loose files."""
    if len(files) == 1 and next(iter(files)).lower().endswith(".zip"):
        return KnowledgeFiles.from_zip(next(iter(files.values())))
    return None


def project_from_files(files: Mapping[str, bytes], *, layout: str | None = None) -> Project:
    """A project from uploaded files: one zip, or the loose YAML or JSONC files. A zip may hold its
    files under a top folder (CrewAI's ``src/<name>/config/...``). With both layouts present,
    ``layout`` picks one; without it, the one whose file comes first. A zip's ``knowledge/``
    files come with it (``crews.interop.knowledge``)."""
    knowledge = project_knowledge(files)
    if len(files) == 1 and next(iter(files)).lower().endswith(".zip"):
        files = read_zip(next(iter(files.values())))
    project = _project_from_files(files, layout)
    project.knowledge = knowledge
    return project


def _project_from_files(files: Mapping[str, bytes], layout: str | None) -> Project:
    total = sum(len(data) for data in files.values())
    if len(files) > MAX_PROJECT_FILES or total > MAX_PROJECT_BYTES:
        raise ImportRejected([Problem("file", None, "", _("These files are too large to be a crew project."))])
    yaml_agents = _named(files, "agents.yaml", "agents.yml")
    jsonc_crew = _named(files, "crew.jsonc", "crew.json")
    order = list(files)
    if layout is None and yaml_agents and jsonc_crew:
        layout = YAML if order.index(yaml_agents[0]) < order.index(jsonc_crew[0]) else JSONC
    layout = layout or (YAML if yaml_agents else JSONC if jsonc_crew else None)
    if layout == YAML and yaml_agents:
        agents_path = yaml_agents[0]
        folder = str(PurePosixPath(agents_path).parent)
        folder = "" if folder == "." else folder + "/"
        tasks_path = next((p for p in (folder + "tasks.yaml", folder + "tasks.yml") if p in files), None)
        if tasks_path is None:
            raise ImportRejected([Problem(folder + "tasks.yaml", None, "", _("tasks.yaml is missing."))])
        crew_path = next((p for p in (folder + "crew.yaml", folder + "crew.yml") if p in files), None)
        return project_from_yaml(
            agents_yaml=_text(agents_path, files[agents_path]),
            tasks_yaml=_text(tasks_path, files[tasks_path]),
            crew=_text(crew_path, files[crew_path]) if crew_path else None,
            files=(agents_path, tasks_path, crew_path or folder + "crew.yaml"),
            default_name=_folder_name(agents_path),
        )
    if layout == JSONC and jsonc_crew:
        crew_path = jsonc_crew[0]
        folder = str(PurePosixPath(crew_path).parent)
        folder = "" if folder == "." else folder + "/"
        texts: dict[str, str] = {}
        paths: dict[str, str] = {}
        for path, data in files.items():
            pure = PurePosixPath(path)
            if path == crew_path or pure.suffix.lower() not in (".jsonc", ".json"):
                continue
            # agents/<name>.jsonc next to crew.jsonc; loose uploads have no folder.
            if path.startswith(folder + "agents/") or "/" not in path:
                texts.setdefault(pure.stem, _text(path, data))
                paths.setdefault(pure.stem, path)
        return project_from_jsonc(
            crew_jsonc=_text(crew_path, files[crew_path]), agents=texts, crew_file=crew_path, agent_files=paths,
        )
    raise ImportRejected([Problem("file", None, "", _(
        "No crew found: give config/agents.yaml and config/tasks.yaml, or crew.jsonc with agents/<name>.jsonc."
    ))])
