"""The import page (upload or paste, preview, settle unknown names, import) and the export link."""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from agents.models import LLM, Agent
from crews.interop import sources
from crews.models import Crew
from tests.conftest import signed_in
from tests.crews.interop_helpers import CLASSIC, JSONC, counts, line_of, zip_of

URL = "/crews/import/"


def paste(**extra: Any) -> dict[str, Any]:
    return {"agents_yaml": (CLASSIC / "agents.yaml").read_text(),
            "tasks_yaml": (CLASSIC / "tasks.yaml").read_text(), **extra}


def jsonc_zip(llm: str) -> bytes:
    researcher = (JSONC / "agents" / "researcher.jsonc").read_text().replace('"demo/offline"', json.dumps(llm))
    return zip_of({"research/crew.jsonc": (JSONC / "crew.jsonc").read_text(),
                   "research/agents/researcher.jsonc": researcher,
                   "research/agents/reporting_analyst.jsonc": (JSONC / "agents" / "reporting_analyst.jsonc").read_text()})


def mapping_field(page: str) -> str:
    found = re.search(r'<select name="(map-[^"]+)"', page)
    assert found is not None, "no mapping field"
    return found[1]


def test_the_crew_list_links_builders_to_the_import_page(builder_client, viewer):
    assert reverse("crews:crew-import") == URL
    assert URL in builder_client.get("/crews/").content.decode()
    assert URL not in signed_in(viewer).get("/crews/").content.decode()
    assert signed_in(viewer).get(URL).status_code == 403


def test_pasted_yaml_previews_the_crew_and_stores_nothing(builder_client):
    before = counts()

    response = builder_client.post(URL, paste(name="Research", action="preview"))

    page = response.content.decode()
    assert response.status_code == 200
    assert "What will be created" in page and "Research" in page
    assert re.search(r"research_task</strong>\s*— done by researcher", page)
    assert "Uses the output of: research_task" in page
    assert "allow_delegation" in page  # a notice
    assert counts() == before


def test_a_problem_is_shown_with_its_file_line_and_key_and_the_input_is_kept(builder_client):
    tasks = (CLASSIC / "tasks.yaml").read_text().replace("agent: reporting_analyst", "agent: writer")

    response = builder_client.post(URL, paste(tasks_yaml=tasks, action="import"))

    page = response.content.decode()
    assert response.status_code == 422
    line = line_of(tasks, "agent: writer")
    assert f"<code>tasks.yaml, line {line}, reporting_task.agent</code>: There is no agent writer" in page
    assert "agent: writer" in page  # the pasted text is still in its box
    assert Crew.objects.count() == 0


def test_an_uploaded_zip_with_an_unknown_llm_is_mapped_then_imported(builder_client, builder):
    demo = LLM.objects.get(model="demo/offline")
    upload = SimpleUploadedFile("research.zip", jsonc_zip("openai/gpt-4o"), "application/zip")

    preview = builder_client.post(URL, {"files": upload, "action": "preview"})

    page = preview.content.decode()
    field = mapping_field(page)
    assert "LLM “openai/gpt-4o”" in page and field.startswith("map-llm_")
    kept = re.search(r'name="project" value="([^"]*)"', page)
    assert kept is not None
    project = kept[1].replace("&quot;", '"').replace("&#x27;", "'").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    assert Crew.objects.count() == 0

    response = builder_client.post(URL, {"project": project, field: str(demo.pk), "action": "import"})

    crew = Crew.objects.get(owner=builder)
    assert response.status_code == 302 and response["Location"] == f"/crews/{crew.pk}/"
    assert Agent.objects.get(owner=builder, name="researcher").llm_id == demo.pk


def test_the_crew_page_offers_an_export_that_downloads_the_zip(builder_client, builder):
    builder_client.post(URL, paste(name="Research", action="import"))
    crew = Crew.objects.get(owner=builder)

    page = builder_client.get(f"/crews/{crew.pk}/").content.decode()
    response = builder_client.get(reverse("crews:crew-export", args=[crew.pk]))

    assert f'href="/crews/{crew.pk}/export/" download' in page
    assert response["Content-Type"] == "application/zip"
    data = response.getvalue()  # streamed
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert {"config/agents.yaml", "config/tasks.yaml", "crew.jsonc", "agents/researcher.jsonc"} <= set(names)
    agents = yaml.safe_load(zipfile.ZipFile(io.BytesIO(data)).read("config/agents.yaml"))
    assert list(agents) == ["reporting_analyst", "researcher"]


def test_a_choice_made_for_one_name_never_applies_to_another_project_s_name(builder_client, builder):
    demo = LLM.objects.get(model="demo/offline")
    first = builder_client.post(URL, {"files": SimpleUploadedFile("a.zip", jsonc_zip("openai/gpt-4o")),
                                      "action": "preview"})
    field = mapping_field(first.content.decode())

    # The person uploads another project and presses Import with the old page's choice still set.
    response = builder_client.post(URL, {"files": SimpleUploadedFile("b.zip", jsonc_zip("anthropic/claude-3")),
                                         field: str(demo.pk), "action": "import"})

    page = response.content.decode()
    assert response.status_code == 200 and Crew.objects.count() == 0
    assert "LLM “anthropic/claude-3”" in page and mapping_field(page) != field
    assert not Agent.objects.filter(owner=builder).exists()


def test_files_over_the_limit_are_a_form_error(builder_client):
    big = SimpleUploadedFile("crew.zip", b"PK" + b"\0" * sources.MAX_PROJECT_BYTES, "application/zip")

    response = builder_client.post(URL, {"files": big, "action": "preview"})

    page = response.content.decode()
    assert response.status_code == 422
    assert "too large to be a crew project: at most 5 MB" in page and "not a zip file" not in page
    assert Crew.objects.count() == 0


def test_a_kept_project_that_cannot_be_text_is_refused_as_no_project(builder_client):
    response = builder_client.post(URL, {"project": '{"crew.jsonc": "\\ud800"}', "action": "preview"})

    assert response.status_code == 422
    assert "Upload the project" in response.content.decode()
