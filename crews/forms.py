"""Forms of the crew and task pages: they validate and render; views hand data to the services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from agents.forms import ServiceErrorsMixin
from agents.models import LLM, Agent
from crews.models import Crew, Task
from crews.task_checks import GUARDRAIL_KEYS, MAX_PATTERN, clean_guardrails, clean_output_schema
from planner_site.body_checks import MAX_INPUT_KEYS, CheckedJSONField


def _textarea(rows: int) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows})


class JSONObjectField(CheckedJSONField):
    """A JSON field whose empty value shows as an empty box, not ``null``; it refuses what the
    API refuses (a lone surrogate, NUL, nesting deeper than ``MAX_DEPTH``)."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


class CrewForm(ServiceErrorsMixin, forms.ModelForm):
    """A crew's settings, and its default inputs: one row per placeholder, JSON for the rest.

    The form never saves: ``service_kwargs()`` is what ``crew_create``/``crew_update`` take.
    """

    extra_inputs = JSONObjectField(
        label=_("Other default inputs (JSON)"),
        required=False,
        widget=_textarea(3),
        help_text=_('A JSON object, like {"year": 2026}. For values that are not plain text.'),
    )

    # Planning as one plain choice: it sets the model's ``planning`` and ``review_plan``. A post
    # without it (an older page, a script) keeps those two boxes as posted.
    PLAN_MODES = (
        ("review", _("Draft a plan I review first")),
        ("auto", _("Plan and run at once")),
        ("none", _("No plan")),
    )
    PLAN_MODE_HELP = {
        "review": _("The LLM drafts a step-by-step plan for every task; you edit and approve it, then the crew "
                    "does exactly that."),
        "auto": _("The run drafts its plan and follows it without waiting for anyone."),
        "none": _("Each agent works from the task text alone."),
    }
    plan_mode = forms.ChoiceField(label=_("Plan"), choices=PLAN_MODES, required=False, widget=forms.RadioSelect)

    service_error_fields = {
        "agent_ids": "agents",
        "default_inputs": "extra_inputs",
        "manager_llm_id": "manager_llm",
        "planning_llm_id": "planning_llm",
    }

    class Meta:
        model = Crew
        fields = [
            "name",
            "description",
            "process",
            "agents",
            "manager_llm",
            "planning",
            "planning_llm",
            "review_plan",
            "run_without_plan_on_failure",
            "on_step_failure",
            "max_rpm",
            "budget_max_tokens",
            "budget_max_cost_usd",
            "shared",
            "memory",
        ]
        widgets = {
            "description": _textarea(3),
            "process": forms.RadioSelect,
            "agents": forms.CheckboxSelectMultiple,
            "on_step_failure": forms.RadioSelect,
        }
        help_texts = {
            "manager_llm": _("Needed for the hierarchical process: it delegates the tasks."),
            "max_rpm": _("Empty: no limit."),
            "budget_max_tokens": _(
                "The run stops when it has used this many tokens. Empty: no limit."
            ),
            "budget_max_cost_usd": _("The run stops when it has cost this much. Empty: no limit."),
        }

    def __init__(
        self,
        data: Any = None,
        *,
        agents: QuerySet[Agent],
        llms: QuerySet[LLM],
        crew: Crew | None = None,
        input_names: list[str] | tuple[str, ...] = (),
    ) -> None:
        initial: dict[str, Any] = {}
        defaults: dict[str, Any] = {}
        if crew is not None:
            initial = forms.model_to_dict(crew, fields=self._meta.fields)
            defaults = dict(crew.default_inputs or {})
        # Text values of discovered inputs get a row each; anything else stays in the JSON.
        self.input_rows = [n for n in input_names if isinstance(defaults.get(n, ""), str)]
        for name in self.input_rows:
            initial[f"input__{name}"] = defaults.pop(name, "")
        initial["extra_inputs"] = defaults or None
        if crew is not None:
            initial["plan_mode"] = ("review" if crew.review_plan else "auto") if crew.planning else "none"
        else:
            initial["plan_mode"] = "review"  # what the product is for: a plan a person approves
        super().__init__(data, initial=initial)
        self.fields["agents"].queryset = agents
        self.fields["agents"].help_text = _("Only your own agents. A task's agent joins the crew.")
        self.fields["manager_llm"].queryset = llms
        self.fields["manager_llm"].empty_label = _("None")
        self.fields["planning_llm"].queryset = llms
        self.fields["planning_llm"].empty_label = _("The site default")
        # A form posted without the choice (an older page, a script) keeps the default.
        self.fields["on_step_failure"].required = False
        for name in self.input_rows:
            self.fields[f"input__{name}"] = forms.CharField(
                label=name, required=False, strip=False, widget=_textarea(1)
            )

    def input_fields(self) -> list[forms.BoundField]:
        return [self[f"input__{name}"] for name in self.input_rows]

    def clean_on_step_failure(self) -> str:
        return self.cleaned_data.get("on_step_failure") or Crew._meta.get_field("on_step_failure").default

    def plan_mode_choices(self) -> list[tuple[forms.BoundField, str]]:
        """The plan choices with the sentence that says what each does, for the template."""
        return [(choice, self.PLAN_MODE_HELP[choice.data["value"]]) for choice in self["plan_mode"]]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        mode = cleaned.get("plan_mode")
        if mode:
            cleaned["planning"] = mode != "none"
            cleaned["review_plan"] = mode == "review"
        extra = cleaned.get("extra_inputs")
        if extra is not None and not isinstance(extra, dict):
            self.add_error(
                "extra_inputs", _('Give a JSON object of name: value, like {"topic": "AI"}.')
            )
            return cleaned
        if extra and len(extra) > MAX_INPUT_KEYS:
            self.add_error("extra_inputs", _("At most %(n)s inputs.") % {"n": MAX_INPUT_KEYS})
            return cleaned
        inputs = dict(extra or {})
        for name in self.input_rows:
            value = cleaned.get(f"input__{name}") or ""
            if not value.strip():
                continue
            if name in inputs:
                self.add_error(
                    "extra_inputs", _("%(name)s already has a value above.") % {"name": name}
                )
            inputs[name] = value
        cleaned["default_inputs"] = inputs
        return cleaned

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``crew_create`` / ``crew_update``."""
        data = {name: self.cleaned_data[name] for name in self._meta.fields}
        data["default_inputs"] = self.cleaned_data["default_inputs"]
        return data


class TaskForm(ServiceErrorsMixin, forms.ModelForm):
    """One task of a crew; its context may only use earlier tasks.

    The answer's shape is one JSON schema box (``output_schema``): the schema builder
    (static/schema-builder.js) edits it field by field, and without JavaScript it is typed in.
    Its checks are plain fields (lists one per line), gathered into ``Task.guardrails``.
    """

    service_error_fields = {"agent_id": "agent", "context_task_ids": "context", "guardrails": "criteria"}

    output_schema = JSONObjectField(
        label=_("JSON schema of the answer"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "data-schema-source": "", "spellcheck": "false"}),
        help_text=_('Leave empty for a free-text answer. A JSON schema whose root has "type": "object" '
                    'or "type": "array".'),
    )
    criteria = forms.CharField(
        label=_("Criteria an LLM checks"), required=False, widget=_textarea(3),
        help_text=_("One per line, in plain words, like “Cites at least two sources”."),
    )
    min_chars = forms.IntegerField(label=_("At least (characters)"), required=False, min_value=0)
    max_chars = forms.IntegerField(label=_("At most (characters)"), required=False, min_value=1)
    must_contain = forms.CharField(
        label=_("Must contain"), required=False, widget=_textarea(2), help_text=_("One per line; case does not matter.")
    )
    must_not_contain = forms.CharField(
        label=_("Must not contain"), required=False, widget=_textarea(2), help_text=_("One per line; case does not matter.")
    )
    pattern = forms.CharField(
        label=_("Must match (regular expression)"), required=False, max_length=MAX_PATTERN,
        help_text=_("Searched anywhere in the answer, like ^# for an answer that starts with a heading."),
    )

    class Meta:
        model = Task
        fields = [
            "name",
            "description",
            "expected_output",
            "agent",
            "context",
            "async_execution",
            "human_input",
            "guardrail_max_retries",
        ]
        widgets = {
            "description": _textarea(5),
            "expected_output": _textarea(3),
            "context": forms.CheckboxSelectMultiple,
        }
        help_texts = {
            "description": _("Write {topic} for a crew input; it is asked for at kickoff."),
            "context": _("Only earlier tasks can be used."),
            "async_execution": _("Only for tasks whose output the next tasks do not need."),
        }

    def __init__(
        self,
        data: Any = None,
        *,
        agents: QuerySet[Agent],
        earlier_tasks: QuerySet[Task],
        task: Task | None = None,
    ) -> None:
        initial = forms.model_to_dict(task, fields=self._meta.fields) if task is not None else {}
        if task is not None:
            initial.update(checks_initial(task))
        super().__init__(data, initial=initial)
        # Empty keeps the default: a form posted by an older page (or a script) still saves.
        self.fields["guardrail_max_retries"].required = False
        agent = self.fields["agent"]
        agent.queryset = agents
        agent.empty_label = _("No agent yet")
        agent.error_messages["invalid_choice"] = _("Choose one of the crew owner's agents.")
        context = self.fields["context"]
        context.queryset = earlier_tasks
        if not earlier_tasks.exists():
            context.help_text = _("None: no task comes before this one.")
        context.error_messages["invalid_choice"] = _(
            "Only earlier tasks of this crew can be used (%(value)s is not one)."
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("guardrail_max_retries") is None and "guardrail_max_retries" not in self.errors:
            cleaned["guardrail_max_retries"] = Task._meta.get_field("guardrail_max_retries").default
        try:
            cleaned["output_schema"] = clean_output_schema(cleaned.get("output_schema"))
        except ValidationError as exc:
            self.add_error("output_schema", exc.message_dict["output_schema"])
        try:
            cleaned["guardrails"] = clean_guardrails({key: cleaned.get(key) for key in GUARDRAIL_KEYS})
        except ValidationError as exc:
            self.add_service_errors(exc)
        return cleaned

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``task_create`` / ``task_update``."""
        data = {name: self.cleaned_data[name] for name in self._meta.fields}
        data["output_schema"] = self.cleaned_data["output_schema"]
        data["guardrails"] = self.cleaned_data["guardrails"]
        return data


def checks_initial(task: Task) -> dict[str, Any]:
    """The task's schema and checks as the form shows them (lists one per line)."""
    checks = task.guardrails or {}
    initial: dict[str, Any] = {"output_schema": task.output_schema}
    for key in ("criteria", "must_contain", "must_not_contain"):
        initial[key] = "\n".join(checks.get(key) or [])
    for key in ("min_chars", "max_chars", "pattern"):
        initial[key] = checks.get(key)
    return initial
