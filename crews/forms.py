"""Forms of the crew and task pages: they validate and render; views hand data to the services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from agents.forms import ServiceErrorsMixin
from agents.models import LLM, Agent
from crews.models import Crew, Task


def _textarea(rows: int) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows})


class JSONObjectField(forms.JSONField):
    """A JSON field whose empty value shows as an empty box, not ``null``."""

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
    """One task of a crew; its context may only use earlier tasks."""

    service_error_fields = {"agent_id": "agent", "context_task_ids": "context"}

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
        super().__init__(data, initial=initial)
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

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``task_create`` / ``task_update``."""
        return {name: self.cleaned_data[name] for name in self._meta.fields}
