"""Knowledge sources in export and import (issue #19): their files travel under ``knowledge/`` by
name and content, listed by their agent or crew; memories stay behind."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.datastructures import MultiValueDict
from ninja.testing import TestClient

from crews.interop.knowledge import in_folder, top_folder
from crews.models import Crew
from knowledge.models import KnowledgeSource, Memory
from planner_site.api import api
from tests.knowledge.files import pdf_with_text
from tests.knowledge.helpers import FACT, island_crew, paste, upload

TIMETABLE = "Ferries to Ilha Verde leave at nine."


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


@pytest.fixture
def crew(client, builder, django_capture_on_commit_callbacks) -> Crew:
    """The island crew: the researcher's own PDF, the crew's pasted timetable, one memory."""
    crew = island_crew(builder, None)
    researcher = crew.agents.get(role="Researcher")
    upload(client, builder, f"agents/{researcher.pk}", pdf_with_text("Island notes.", FACT), "keepers.pdf",
           django_capture_on_commit_callbacks, title="Keepers")
    paste(client, builder, f"crews/{crew.pk}", "Timetable", TIMETABLE, django_capture_on_commit_callbacks)
    Memory.objects.create(crew=crew, user=builder, text="Visitors like short answers.")
    return crew


def export(client: TestClient, user: Any, crew: Crew, fmt: str = "crewai-yaml") -> bytes:
    response = client.get(f"/crews/{crew.pk}/export?format={fmt}", user=user)
    assert response.status_code == 200, response.content
    return response.content


def import_zip(client: TestClient, user: Any, data: bytes, capture: Any, query: str = "") -> Any:
    files = MultiValueDict({"file": [SimpleUploadedFile("crew.zip", data, "application/zip")]})
    with capture(execute=True):
        return client.post(f"/crews/import{query}", FILES=files, user=user)


def sources_of(crew: Crew) -> dict[str, list[tuple[str, str, bytes]]]:
    """Each owner's sources (by agent role, or "crew"): title, kind and content."""
    found: dict[str, list[tuple[str, str, bytes]]] = {}
    for source in KnowledgeSource.objects.filter(crew=crew):
        found.setdefault("crew", []).append((source.title, source.kind, bytes(source.content)))
    for agent in crew.agents.all():
        for source in KnowledgeSource.objects.filter(agent=agent):
            found.setdefault(agent.role, []).append((source.title, source.kind, bytes(source.content)))
    return found


def rezip(data: bytes, change: Any) -> bytes:
    """``data``'s zip with ``change(files)`` applied to its {path: bytes}."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    change(files)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return out.getvalue()


def test_an_export_carries_each_source_under_knowledge_listed_by_its_owner_and_no_memory(client, builder, crew):
    archive = zipfile.ZipFile(io.BytesIO(export(client, builder, crew)))

    names = archive.namelist()
    assert names[:2] == ["knowledge/Timetable.txt", "knowledge/keepers.pdf"]  # the lists come after them
    assert archive.read("knowledge/Timetable.txt").decode() == TIMETABLE
    assert archive.read("knowledge/keepers.pdf").startswith(b"%PDF")
    agents = yaml.safe_load(archive.read("config/agents.yaml"))
    researcher = next(a for a in agents.values() if a["role"] == "Researcher")
    assert researcher["crew_planner"]["knowledge"] == [{"title": "Keepers", "file": "keepers.pdf"}]
    writer = next(a for a in agents.values() if a["role"] == "Writer")
    assert "knowledge" not in writer.get("crew_planner", {})
    crew_yaml = yaml.safe_load(archive.read("config/crew.yaml"))
    assert crew_yaml["crew_planner"]["knowledge"] == [{"title": "Timetable", "file": "Timetable.txt"}]
    crew_jsonc = json.loads(archive.read("crew.jsonc"))
    assert crew_jsonc["crew_planner"]["knowledge"] == crew_yaml["crew_planner"]["knowledge"]
    everything = b"".join(archive.read(n) for n in names)
    assert b"Visitors like short answers" not in everything  # memories stay behind


def test_a_source_deleted_while_the_export_is_written_is_off_its_list_and_the_zip_still_imports(
    client, builder, crew, monkeypatch, django_capture_on_commit_callbacks
):
    from crews.interop import exporting

    real = exporting.export_sources

    def then_deleted(owners):
        found = real(owners)
        KnowledgeSource.objects.filter(title="Keepers").delete()  # after the listing, before its file
        return found

    monkeypatch.setattr(exporting, "export_sources", then_deleted)
    data = export(client, builder, crew)
    archive = zipfile.ZipFile(io.BytesIO(data))

    assert "knowledge/keepers.pdf" not in archive.namelist()
    agents = yaml.safe_load(archive.read("config/agents.yaml"))
    assert all("knowledge" not in a.get("crew_planner", {}) for a in agents.values())
    monkeypatch.setattr(exporting, "export_sources", real)
    response = import_zip(client, builder, data, django_capture_on_commit_callbacks)
    assert response.status_code == 201, response.content
    assert [s[:2] for s in sources_of(Crew.objects.get(pk=response.json()["id"]))["crew"]] == [("Timetable", "text")]


@pytest.mark.parametrize("fmt", ["crewai-yaml", "crew-jsonc"])
def test_importing_an_export_gives_the_same_sources_with_their_indexing_queued(
    client, builder, crew, fmt, django_capture_on_commit_callbacks
):
    response = import_zip(client, builder, export(client, builder, crew, fmt), django_capture_on_commit_callbacks)

    assert response.status_code == 201, response.content
    copy = Crew.objects.get(pk=response.json()["id"])
    assert sources_of(copy) == sources_of(crew)
    assert sources_of(copy)["Researcher"][0][:2] == ("Keepers", "pdf")
    imported = KnowledgeSource.objects.filter(crew=copy).get()
    assert imported.status == KnowledgeSource.Status.INDEXED and imported.chunk_count == 1  # indexed after
    assert not Memory.objects.filter(crew=copy).exists()


def test_a_dry_run_lists_the_sources_it_would_add_and_stores_none(
    client, builder, crew, django_capture_on_commit_callbacks
):
    before = KnowledgeSource.objects.count()

    response = import_zip(client, builder, export(client, builder, crew), django_capture_on_commit_callbacks,
                          query="?dry_run=true")

    assert response.status_code == 200, response.content
    notices = response.json()["notices"]
    assert any("1 knowledge source added (Keepers)" in n for n in notices), notices
    assert KnowledgeSource.objects.count() == before


def test_a_listed_file_missing_too_large_or_of_an_unread_kind_is_named_and_nothing_is_imported(
    client, builder, crew, settings, django_capture_on_commit_callbacks
):
    def change(files: dict[str, bytes]) -> None:
        del files["knowledge/keepers.pdf"]
        crew_yaml = yaml.safe_load(files["config/crew.yaml"])
        crew_yaml["crew_planner"]["knowledge"].append({"title": "Photo", "file": "island.png"})
        files["config/crew.yaml"] = yaml.safe_dump(crew_yaml).encode()
        files["knowledge/island.png"] = b"\x89PNG not text"

    crews_before = Crew.objects.count()
    response = import_zip(client, builder, rezip(export(client, builder, crew), change),
                          django_capture_on_commit_callbacks)

    assert response.status_code == 422, response.content
    errors = {e["file"]: e["message"] for e in response.json()["errors"]}
    assert errors["knowledge/keepers.pdf"] == "This file is not in the zip's knowledge folder."
    assert errors["knowledge/island.png"].startswith("Upload plain text (.txt)")
    assert Crew.objects.count() == crews_before

    settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES = 10
    response = import_zip(client, builder, export(client, builder, crew), django_capture_on_commit_callbacks)
    assert response.status_code == 422, response.content
    files = [e["file"] for e in response.json()["errors"]]
    assert files == ["knowledge/Timetable.txt", "knowledge/keepers.pdf"]
    assert "larger than" in response.json()["errors"][0]["message"]


def test_a_project_given_as_text_leaves_its_sources_out_and_says_so(client, builder, crew):
    archive = zipfile.ZipFile(io.BytesIO(export(client, builder, crew)))
    body = {
        "format": "crewai-yaml",
        "agents_yaml": archive.read("config/agents.yaml").decode(),
        "tasks_yaml": archive.read("config/tasks.yaml").decode(),
        "crew": yaml.safe_load(archive.read("config/crew.yaml")),
    }

    response = client.post("/crews/import?dry_run=true", json=body, user=builder)

    assert response.status_code == 200, response.content
    notices = response.json()["notices"]
    assert any("1 knowledge source is left out: only a zip" in n for n in notices), notices


def test_a_knowledge_json_file_is_not_read_as_a_project_file(client, builder, crew, django_capture_on_commit_callbacks):
    def change(files: dict[str, bytes]) -> None:
        files["knowledge/crew.json"] = b'{"not": "a crew"}'

    response = import_zip(client, builder, rezip(export(client, builder, crew, "crew-jsonc"), change),
                          django_capture_on_commit_callbacks)

    assert response.status_code == 201, response.content


def test_the_import_page_keeps_the_zips_knowledge_files_from_preview_to_import(
    client, builder, builder_client, crew, django_capture_on_commit_callbacks
):
    upload = SimpleUploadedFile("islands.zip", export(client, builder, crew), "application/zip")

    preview = builder_client.post("/crews/import/", {"files": upload, "action": "preview"})

    page = preview.content.decode()
    assert preview.status_code == 200, page
    assert "1 knowledge source added (Keepers)" in page
    kept = re.search(r'name="project" value="([^"]*)"', page)
    assert kept is not None
    project = html.unescape(kept[1])
    assert "knowledge/keepers.pdf" in json.loads(project)

    with django_capture_on_commit_callbacks(execute=True):
        response = builder_client.post("/crews/import/", {"project": project, "action": "import"})

    assert response.status_code == 302, response.content.decode()
    copy = Crew.objects.filter(owner=builder).exclude(pk=crew.pk).get()
    assert sources_of(copy) == sources_of(crew)


def list_in(files: dict[str, bytes], role: str | None, *entries: dict[str, str]) -> None:
    """Add ``entries`` to the YAML ``crew_planner.knowledge`` of the agent ``role`` (None: the crew)."""
    path = "config/crew.yaml" if role is None else "config/agents.yaml"
    data = yaml.safe_load(files[path])
    owner = data if role is None else next(a for a in data.values() if a["role"] == role)
    owner.setdefault("crew_planner", {}).setdefault("knowledge", []).extend(entries)
    files[path] = yaml.safe_dump(data).encode()


def test_a_file_listed_twice_is_refused_naming_it_so_a_small_zip_cannot_store_it_many_times(
    client, builder, crew, django_capture_on_commit_callbacks
):
    def change(files: dict[str, bytes]) -> None:
        list_in(files, None, {"title": "Again", "file": "Timetable.txt"})
        list_in(files, "Writer", {"title": "And again", "file": "Timetable.txt"})

    data = rezip(export(client, builder, crew), change)
    sources_before = KnowledgeSource.objects.count()

    for query in ("?dry_run=true", ""):
        response = import_zip(client, builder, data, django_capture_on_commit_callbacks, query=query)

        assert response.status_code == 422, response.content
        twice = [e for e in response.json()["errors"] if e["file"] == "knowledge/Timetable.txt"]
        assert len(twice) == 2 and all("listed more than once" in e["message"] for e in twice), twice
    assert KnowledgeSource.objects.count() == sources_before


def test_the_files_read_count_against_the_knowledge_limit_as_they_are_read(
    client, builder, crew, monkeypatch, django_capture_on_commit_callbacks
):
    data = export(client, builder, crew)
    monkeypatch.setattr("crews.interop.knowledge.MAX_KNOWLEDGE_BYTES", len(TIMETABLE) + 10)
    # The folder as listed passes the check of its sizes; reading past the limit is what stops.
    monkeypatch.setattr("crews.interop.knowledge.KnowledgeFiles.check_sizes", lambda self: None)

    response = import_zip(client, builder, data, django_capture_on_commit_callbacks)

    assert response.status_code == 422, response.content
    errors = {e["file"]: e["message"] for e in response.json()["errors"]}
    assert list(errors) == ["knowledge/keepers.pdf"] and "too large" in errors["knowledge/keepers.pdf"]


def test_a_dry_run_checks_each_file_without_creating_a_source(
    client, builder, crew, monkeypatch, django_capture_on_commit_callbacks
):
    def refuse(**_kwargs: Any) -> None:
        raise AssertionError("a dry run created a source")

    monkeypatch.setattr("crews.interop.knowledge.source_create", refuse)
    data = export(client, builder, crew)

    response = import_zip(client, builder, data, django_capture_on_commit_callbacks, query="?dry_run=true")
    assert response.status_code == 200, response.content
    assert any("1 knowledge source added (Keepers)" in n for n in response.json()["notices"])

    def change(files: dict[str, bytes]) -> None:
        files["knowledge/Timetable.txt"] = b"  \n"
        list_in(files, None, {"title": "Photo", "file": "island.png"})
        files["knowledge/island.png"] = b"\x89PNG not text"

    response = import_zip(client, builder, rezip(data, change), django_capture_on_commit_callbacks,
                          query="?dry_run=true")
    assert response.status_code == 422, response.content
    errors = {e["file"]: e["message"] for e in response.json()["errors"]}
    assert errors["knowledge/Timetable.txt"] == "The source is empty."
    assert errors["knowledge/island.png"].startswith("Upload plain text (.txt)")


def test_a_project_whose_folder_is_named_knowledge_imports_with_its_sources(
    client, builder, crew, django_capture_on_commit_callbacks
):
    def change(files: dict[str, bytes]) -> None:
        for name in list(files):
            files[f"knowledge/{name}"] = files.pop(name)  # a CrewAI project named "knowledge"

    response = import_zip(client, builder, rezip(export(client, builder, crew), change),
                          django_capture_on_commit_callbacks)

    assert response.status_code == 201, response.content
    assert sources_of(Crew.objects.get(pk=response.json()["id"])) == sources_of(crew)
    assert in_folder("knowledge/knowledge/x.md", top="knowledge") == "x.md"
    assert in_folder("knowledge/config/agents.yaml", top="knowledge") is None
    assert in_folder("knowledge/a/b/knowledge/x.md", top="knowledge") is None
    assert in_folder("a/b/knowledge/x.md") is None and in_folder("knowledge/x.md") == "x.md"
    assert top_folder(["proj/crew.jsonc", "proj/knowledge/x.md"]) == "proj"
    assert top_folder(["crew.jsonc", "knowledge/x.md"]) == ""


def test_knowledge_files_the_page_could_not_post_back_are_not_kept_so_its_import_post_is_read(
    client, builder, builder_client, crew, settings, django_capture_on_commit_callbacks
):
    paste(client, builder, f"crews/{crew.pk}", "Long", "x" * 80_000, django_capture_on_commit_callbacks)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    upload = SimpleUploadedFile("islands.zip", export(client, builder, crew), "application/zip")

    preview = builder_client.post("/crews/import/", {"files": upload, "action": "preview"})

    page = preview.content.decode()
    assert preview.status_code == 200, page
    assert "choose the zip again" in page
    project = html.unescape(re.search(r'name="project" value="([^"]*)"', page)[1])
    assert len(project.encode()) < settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert {name: text for name, text in json.loads(project).items() if name.startswith("knowledge/")} == {
        "knowledge/Timetable.txt": "", "knowledge/Long.txt": "", "knowledge/keepers.pdf": ""}  # named only
    crews_before = Crew.objects.count()

    response = builder_client.post("/crews/import/", {"project": project, "action": "import"})

    page = html.unescape(response.content.decode())
    assert response.status_code == 422, page  # read, not "request too large"; and no silent loss
    assert page.count("This file was too large to keep between Preview and Import: choose the zip again") == 3
    assert Crew.objects.count() == crews_before
    again = html.unescape(re.search(r'name="project" value="([^"]*)"', response.content.decode())[1])
    assert json.loads(again) == json.loads(project)  # the next press asks for the zip again too

    upload = SimpleUploadedFile("islands.zip", export(client, builder, crew), "application/zip")
    with django_capture_on_commit_callbacks(execute=True):
        response = builder_client.post("/crews/import/", {"files": upload, "action": "import"})
    assert response.status_code == 302, response.content.decode()


def test_an_export_leaves_out_the_sources_past_the_limit_and_says_so(
    client, builder, crew, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr("crews.interop.knowledge.MAX_KNOWLEDGE_BYTES", len(TIMETABLE) + 10)

    data = export(client, builder, crew)

    archive = zipfile.ZipFile(io.BytesIO(data))
    assert [n for n in archive.namelist() if n.startswith("knowledge/")] == ["knowledge/Timetable.txt"]
    note = archive.read("KNOWLEDGE_LEFT_OUT.txt").decode()
    assert "Keepers" in note and "Timetable" not in note
    agents = yaml.safe_load(archive.read("config/agents.yaml"))
    assert all("knowledge" not in a.get("crew_planner", {}) for a in agents.values())
    response = import_zip(client, builder, data, django_capture_on_commit_callbacks)
    assert response.status_code == 201, response.content
    assert sources_of(Crew.objects.get(pk=response.json()["id"])) == {"crew": sources_of(crew)["crew"]}
