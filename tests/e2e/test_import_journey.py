"""A builder imports a CrewAI project (a zip of the JSONC layout) naming an LLM this site lacks,
maps it to the demo model, imports, runs the crew to the end and exports it again."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.e2e.conftest import sign_in

FIXTURES = Path(__file__).resolve().parents[1] / "crews" / "fixtures" / "crewai" / "jsonc"


def project_zip() -> bytes:
    """The fixture's JSONC research crew under a top folder, its researcher on a model we lack."""
    researcher = (FIXTURES / "agents" / "researcher.jsonc").read_text()
    files = {
        "research_crew/crew.jsonc": (FIXTURES / "crew.jsonc").read_text(),
        "research_crew/agents/researcher.jsonc": researcher.replace('"demo/offline"', json.dumps("openai/gpt-4o")),
        "research_crew/agents/reporting_analyst.jsonc": (FIXTURES / "agents" / "reporting_analyst.jsonc").read_text(),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def test_import_a_zip_map_its_llm_run_the_crew_and_export_it(page: Page) -> None:
    sign_in(page)
    page.get_by_role("link", name="Import a crew").click()
    page.get_by_label("Project files").set_input_files(
        files=[{"name": "research_crew.zip", "mimeType": "application/zip", "buffer": project_zip()}]
    )
    page.get_by_role("button", name="Preview").click()

    preview = page.get_by_role("region", name="What will be created")
    expect(preview).to_contain_text("research_task")
    expect(preview).to_contain_text("Uses the output of: research_task")
    llm = page.get_by_label("LLM “openai/gpt-4o”")
    expect(llm).to_have_value("")  # left unset until someone chooses
    llm.select_option(label="Offline demo model")
    page.get_by_role("button", name="Import", exact=True).click()

    expect(page).to_have_url(re.compile(r"/crews/\d+/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"^Research crew"))
    crew_url = page.url

    kickoff = page.get_by_role("region", name="Run this crew")
    expect(kickoff.get_by_label("{topic}")).to_have_value("AI agents")  # the project's default input
    kickoff.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=90_000)

    page.goto(crew_url)
    with page.expect_download() as download:
        page.get_by_role("link", name="Export").click()
    archive = zipfile.ZipFile(download.value.path())
    assert download.value.suggested_filename.endswith(".crewai-yaml.zip")
    assert set(archive.namelist()) == {
        "config/agents.yaml", "config/tasks.yaml", "config/crew.yaml", "crew.jsonc",
        "agents/researcher.jsonc", "agents/reporting_analyst.jsonc",
    }
    researcher = json.loads(archive.read("agents/researcher.jsonc"))
    assert researcher["llm"] == "Offline demo model"
    assert researcher["planning_config"]["reasoning_effort"] == "high"
