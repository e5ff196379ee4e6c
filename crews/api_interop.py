"""REST operations to import a crew from CrewAI's project formats and to export one (API.md,
"Import and export")."""

# No ``from __future__ import annotations``: ninja reads the operations' annotations.
import json
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.translation import gettext as _
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.responses import Status
from pydantic import ConfigDict
from pydantic import ValidationError as PydanticValidationError

from crews import selectors
from crews.interop import exporting, importing, sources
from crews.interop.problems import ImportRejected
from crews.schemas import CrewOut
from planner_site.body_checks import BodyRefused, loads_checked
from planner_site.schemas import errors
from planner_site.streaming import StreamedFileResponse

router = Router(tags=["import and export"])

Layout = Literal["crewai-yaml", "crew-jsonc"]
LLMMap = dict[str, int | str | None]
ToolMap = dict[str, str | None]


class ImportMapsIn(Schema):
    model_config = ConfigDict(extra="forbid")

    format: Layout | None = Field(None, description="Which layout to read when a zip holds both.")
    llm_map: LLMMap = Field(
        default_factory=dict,
        description="A name this site lacks → an LLM's id or name, or null to leave it unset.",
    )
    tool_map: ToolMap = Field(
        default_factory=dict, description="A tool name this site lacks → a catalogue tool, or null to leave it out."
    )


class ImportIn(ImportMapsIn):
    format: Layout
    agents_yaml: str | None = Field(None, description="crewai-yaml: the text of config/agents.yaml.")
    tasks_yaml: str | None = Field(None, description="crewai-yaml: the text of config/tasks.yaml.")
    crew: dict[str, Any] | None = Field(
        None,
        description="crewai-yaml: the crew's settings as crew.jsonc has them (name, process, planning, "
        "planning_llm, manager_llm, max_rpm, inputs, crew_planner).",
    )
    crew_jsonc: str | None = Field(None, description="crew-jsonc: the text of crew.jsonc.")
    agents: dict[str, str] | None = Field(None, description="crew-jsonc: each agent's name → its file's text.")


class PreviewAgentOut(Schema):
    key: str
    name: str = Field(description="As it will be created (a name you use already gets \" (2)\").")
    role: str
    goal: str
    llm: str | None
    tools: list[str]
    planning: bool


class PreviewTaskOut(Schema):
    key: str
    name: str
    agent: str | None = Field(description="The agent's name.")
    context: list[str] = Field(description="The names of the earlier tasks whose output it uses.")
    description: str
    expected_output: str
    async_execution: bool
    human_input: bool
    output_schema: dict[str, Any] | None
    guardrails: dict[str, Any]


class PreviewCrewOut(Schema):
    name: str
    description: str
    process: str
    planning: bool
    planning_llm: str | None
    manager_llm: str | None
    review_plan: bool
    on_step_failure: str
    default_inputs: dict[str, Any]
    memory: bool
    agents: list[PreviewAgentOut]
    tasks: list[PreviewTaskOut] = Field(description="In their order.")


class ImportPreviewOut(Schema):
    crew: PreviewCrewOut
    unknown_llms: list[str] = Field(description="Names this site lacks (left unset in the preview).")
    unknown_tools: list[str]
    notices: list[str] = Field(description="What was ignored or changed on the way in.")


class ImportProblemOut(Schema):
    field: str = Field(description="The key in its file, dotted: reporting_task.context.")
    message: str
    file: str = Field(default="", description="Empty when the request itself was refused (say, a body that is not JSON).")
    line: int | None = Field(default=None, description="1-based; null where the input has no lines.")
    key: str = ""


class ImportErrorOut(Schema):
    detail: str
    code: str = Field(description="invalid_project, or unknown_names when only a mapping is missing.")
    errors: list[ImportProblemOut]
    unknown_llms: list[str] = Field(default_factory=list)
    unknown_tools: list[str] = Field(default_factory=list)


def _rejected(exc: ImportRejected) -> Status:
    return Status(422, {
        "detail": exc.detail,
        "code": exc.code,
        "errors": [
            {"field": p.key or p.file, "message": p.message, "file": p.file, "line": p.line, "key": p.key}
            for p in exc.problems
        ],
        "unknown_llms": exc.unknown_llms,
        "unknown_tools": exc.unknown_tools,
    })


def _validated(schema: type[Schema], data: Any) -> Any:
    try:
        return schema.model_validate(data)
    except PydanticValidationError as exc:
        raise NinjaValidationError(exc.errors(include_url=False)) from None


def _form_json(request: HttpRequest, name: str) -> Any:
    raw = request.POST.get(name, "").strip()
    if not raw:
        return {}
    try:  # checked as a JSON body is: a lone surrogate or a NUL could not be looked up
        return loads_checked(raw, field=name)
    except BodyRefused as exc:
        raise ValidationError({exc.field: exc.message}) from None
    except ValueError:
        raise ValidationError({name: _("Give a JSON object.")}) from None


class _TooLarge(Exception):
    """The uploaded files are larger than any crew project (answered 413)."""


def _refuse_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _read_request(request: HttpRequest) -> tuple[sources.Project, ImportMapsIn]:
    """The project and the maps from a JSON body, or from a multipart upload (``file``)."""
    if request.content_type == "multipart/form-data" or request.FILES:
        maps = _validated(ImportMapsIn, {
            "llm_map": _form_json(request, "llm_map"),
            "tool_map": _form_json(request, "tool_map"),
            **({"format": request.POST["format"]} if request.POST.get("format") else {}),
        })
        uploads = request.FILES.getlist("file")
        if not uploads:
            raise ValidationError({"file": _("Upload a zip of the project, or its files.")})
        if sum(upload.size or 0 for upload in uploads) > sources.MAX_PROJECT_BYTES:
            raise _TooLarge  # before reading: Django keeps a large upload on disk until then
        files = {upload.name or "file": upload.read() for upload in uploads}
        return sources.project_from_files(files, layout=maps.format), maps
    try:  # as the API's JSON parser reads bodies (planner_site.api.JSONParser)
        body_text = request.body.decode(json.detect_encoding(request.body))
        data = loads_checked(body_text, parse_constant=_refuse_constant)
    except ValueError as exc:  # the API answers it as a 422 (invalid_json, or the refused value)
        raise HttpError(400, "Cannot parse request body") from exc
    body = _validated(ImportIn, data)
    if body.format == sources.YAML:
        if body.agents_yaml is None or body.tasks_yaml is None:
            raise ValidationError({"agents_yaml": _("Give agents_yaml and tasks_yaml.")})
        project = sources.project_from_yaml(
            agents_yaml=body.agents_yaml, tasks_yaml=body.tasks_yaml, crew=body.crew
        )
    else:
        if body.crew_jsonc is None:
            raise ValidationError({"crew_jsonc": _("Give crew_jsonc and the agents' files.")})
        project = sources.project_from_jsonc(crew_jsonc=body.crew_jsonc, agents=body.agents or {})
    return project, body


@router.post(
    "/crews/import",
    response={200: ImportPreviewOut, 201: CrewOut, 422: ImportErrorOut, **errors(413)},
    summary="Import a crew from CrewAI's YAML or JSONC project",
    description="A JSON body with the files' texts, or multipart: `file` (a zip of either layout, "
    "also under one top folder, or the loose files) with `llm_map`, `tool_map` (JSON) and `format` "
    "as form fields: at most 5 MB in all (413 beyond). Each YAML or JSONC file may hold 256 KB. "
    "LLMs match by name, else by model; tools by name. Names this site lacks are a "
    "422 `unknown_names` listing them, until llm_map/tool_map settle each one (null: leave unset). "
    "Anything else invalid is a 422 `invalid_project` whose errors name file, line and key. With "
    "?dry_run=true nothing is stored and the answer previews the crew. New agents are created; a "
    "crew or agent name you already use gets \" (2)\". A zip's knowledge/ files listed in "
    "`crew_planner.knowledge` become knowledge sources (indexed after the import), each checked as "
    "an upload is; a file that cannot be one is an error naming it.",
    openapi_extra={"requestBody": {"content": {
        "application/json": {"schema": ImportIn.model_json_schema()},
        "multipart/form-data": {"schema": {
            "type": "object",
            "properties": {
                "file": {"type": "array", "items": {"type": "string", "format": "binary"}},
                "llm_map": {"type": "string", "description": "A JSON object."},
                "tool_map": {"type": "string", "description": "A JSON object."},
                "format": {"type": "string", "enum": list(sources.LAYOUTS)},
            },
            "required": ["file"],
        }},
    }, "required": True}},
)
def crew_import(request: HttpRequest, dry_run: bool = False) -> Any:
    importing.crew_import_check_role(actor=request.user)
    try:
        project, maps = _read_request(request)
        result = importing.crew_import(
            actor=request.user, project=project, llm_map=maps.llm_map, tool_map=maps.tool_map, dry_run=dry_run
        )
    except ImportRejected as exc:
        return _rejected(exc)
    except _TooLarge:
        message = sources.too_large()
        return Status(413, {"detail": message, "code": "too_large", "errors": [{"field": "file", "message": message}]})
    if dry_run:
        return Status(200, {
            "crew": result.preview, "unknown_llms": result.unknown_llms,
            "unknown_tools": result.unknown_tools, "notices": result.notices,
        })
    return Status(201, selectors.crew_get(user=request.user, crew_id=result.crew.pk))


@router.get(
    "/crews/{id}/export",
    response={200: None, **errors(404, 422)},
    summary="Export a crew as a zip of CrewAI's YAML and JSONC projects",
    description="The zip always holds both layouts: config/agents.yaml, config/tasks.yaml and "
    "config/crew.yaml (the crew's settings), crew.jsonc and agents/<key>.jsonc. `format` names the "
    "primary one: its files come first, and importing the zip reads it. LLMs and tools are written "
    "by name; no key or address. Knowledge sources travel as files under knowledge/, listed as "
    "`crew_planner.knowledge` ([{title, file}]) on their agent or the crew; memories stay behind. "
    "At most 100 MB of them, as an import takes: the sources past that are left out and named in "
    "KNOWLEDGE_LEFT_OUT.txt. Importing it gives an equal crew.",
    openapi_extra={"responses": {200: {
        "description": "A zip",
        "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
    }}},
)
def crew_export(request: HttpRequest, id: int, format: Layout = "crewai-yaml") -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id)
    filename, archive = exporting.crew_export(crew=crew, layout=format)
    # Streamed from the temporary file, which closing the response removes.
    response = StreamedFileResponse(archive, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
