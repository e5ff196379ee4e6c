"""The import page (upload or paste a CrewAI project, preview it, settle unknown names, import) and
the crew page's export download. Plain form posts: the page keeps what was sent in its fields."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from agents import selectors as agent_selectors
from agents.tools import catalogue_names
from agents.views import HtmxHttpRequest, domain_errors, redirect_after_post, require_builder
from crews import selectors
from crews.forms_interop import CrewImportForm, ImportMappingForm
from crews.interop import exporting, importing, sources
from crews.interop.knowledge import DROPPED, KnowledgeFiles, in_folder, kept_texts, top_folder
from crews.interop.problems import ImportRejected, Problem
from planner_site.body_checks import loads_checked
from planner_site.streaming import StreamedFileResponse


def _kept(raw: str) -> dict[str, str]:
    """The files an earlier post of this page uploaded, as it kept them (or nothing)."""
    try:  # a lone surrogate or NUL in it is no file's text: the post was not this page's
        kept = loads_checked(raw) if raw else {}
    except ValueError:
        return {}
    if isinstance(kept, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in kept.items()):
        return kept
    return {}


def _project(request: HtmxHttpRequest, form: CrewImportForm) -> tuple[sources.Project, dict[str, str], bool]:
    """The project the form names, the uploaded files' texts to keep for the next post (a zip's
    knowledge files among them, as base64), and whether knowledge files were too large to keep."""
    uploads = form.cleaned_data["files"]
    knowledge: KnowledgeFiles | None = None
    if uploads:
        raw = {upload.name: upload.read() for upload in uploads}
        texts = sources.project_texts(raw)
        knowledge = sources.project_knowledge(raw)
    elif form.pasted():
        name = form.cleaned_data["name"].strip()
        project = sources.project_from_yaml(
            agents_yaml=form.cleaned_data["agents_yaml"],
            tasks_yaml=form.cleaned_data["tasks_yaml"],
            crew={"name": name} if name else None,
            files=("agents.yaml", "tasks.yaml", "crew"),
        )
        return project, {}, False
    else:
        kept = _kept(form.cleaned_data["project"])
        top = top_folder(kept)  # as the zip's: the kept files keep their paths in it
        texts = {name: text for name, text in kept.items() if in_folder(name, top) is None}
        if len(texts) < len(kept):
            knowledge = KnowledgeFiles.from_kept(kept)
    if not texts:
        raise ImportRejected([Problem("file", None, "", _("Upload the project's files, or paste its YAML."))])
    project = sources.project_from_files({name: text.encode() for name, text in texts.items()})
    project.knowledge = knowledge
    files = kept_texts(knowledge, texts) if knowledge is not None else {}
    dropped = DROPPED in files.values()
    return project, {**texts, **files}, dropped


@require_http_methods(["GET", "POST"])
@domain_errors
def crew_import(request: HtmxHttpRequest) -> HttpResponse:
    """Preview (a dry run) on every post; ``action=import`` imports once the preview is clean."""
    require_builder(request)
    post = request.method == "POST"
    form = CrewImportForm(request.POST if post else None, request.FILES if post else None)
    context: dict[str, Any] = {"form": form, "kept": {}, "problems": []}
    if post and form.is_valid():
        try:
            project, context["kept"], dropped = _project(request, form)
            first = importing.crew_import(actor=request.user, project=project, dry_run=True)
            mapping = ImportMappingForm(
                request.POST, llm_names=first.unknown_llms, tool_names=first.unknown_tools,
                llms=list(agent_selectors.llm_list()), tools=catalogue_names(),
            )
            maps = {"llm_map": mapping.llm_map(), "tool_map": mapping.tool_map()} if mapping.is_valid() else {}
            # Only choices the person made for these very names: a name not shown yet previews first.
            if request.POST.get("action") == "import" and maps and mapping.answered():
                result = importing.crew_import(actor=request.user, project=project, **maps)
                messages.success(request, _("Crew “%(name)s” imported.") % {"name": result.crew.name})
                return redirect_after_post(request, reverse("crews:crew-detail", args=[result.crew.pk]))
            result = importing.crew_import(actor=request.user, project=project, dry_run=True, **maps)
            context.update(preview=result.preview, notices=result.notices, mapping=mapping)
            if dropped:
                context["notices"].append(_("The knowledge files are too large to keep between Preview and "
                                            "Import: choose the zip again when you press Import."))
        except ImportRejected as exc:
            context["problems"] = exc.problems
    context["kept_json"] = json.dumps(context["kept"], ensure_ascii=False) if context["kept"] else ""
    refused = context["problems"] or (post and form.errors)
    return render(request, "crews/crew_import.html", context, status=422 if refused else 200)


@require_GET
@domain_errors
def crew_export(request: HtmxHttpRequest, crew_id: int) -> StreamedFileResponse:
    """The crew as a zip of CrewAI's two project layouts (``?format=crew-jsonc`` puts JSONC first)."""
    crew = selectors.crew_get(user=request.user, crew_id=crew_id)
    layout = request.GET.get("format") if request.GET.get("format") in sources.LAYOUTS else sources.YAML
    filename, archive = exporting.crew_export(crew=crew, layout=layout)
    # Streamed from the temporary file, which closing the response removes.
    response = StreamedFileResponse(archive, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


urlpatterns = [
    path("crews/import/", crew_import, name="crew-import"),
    path("crews/<int:crew_id>/export/", crew_export, name="crew-export"),
]
