"""Forms of the agent pages: they validate and render; views hand cleaned data to the services."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from agents.engine.specs import PLAN_PROMPT_PLACEHOLDERS, REFINE_PROMPT_PLACEHOLDERS
from agents.models import LLM, Agent, PlanningConfig
from agents.presets import PRESETS, preset_apply, preset_choices
from agents.tool_texts import tool_description
from planner_site.body_checks import CheckedJSONField


class ServiceErrorsMixin:
    """Shows a service's ValidationError next to the field it names.

    Services name some errors after their own arguments (``agent_ids``, ``context_task_ids``);
    ``service_error_fields`` maps those onto this form's fields. Anything left over is shown
    above the form.
    """

    service_error_fields: dict[str, str] = {}

    def add_service_errors(self, exc: ValidationError) -> None:
        form: Any = self
        if not hasattr(exc, "error_dict"):
            form.add_error(None, exc)
            return
        for key, errors in exc.error_dict.items():
            field = self.service_error_fields.get(key, key)
            form.add_error(field if field in form.fields else None, errors)

    def error_summary(self) -> list[dict[str, str]]:
        """Every error with the id of the input it belongs to, for the summary above the form."""
        form: Any = self
        entries = [{"id": "", "label": "", "message": m} for m in form.non_field_errors()]
        for field in form:
            for message in field.errors:
                # Radio and checkbox groups label no single input: point at the first one.
                target = field.id_for_label or (f"{field.auto_id}_0" if field.auto_id else "")
                entries.append({"id": target, "label": str(field.label), "message": message})
        return entries


def _textarea(rows: int) -> forms.Textarea:
    return forms.Textarea(attrs={"rows": rows})


def _placeholder_help(names: frozenset[str]) -> str:
    listed = " ".join("{" + name + "}" for name in sorted(names))
    return str(
        _("Empty: the built-in prompt. Placeholders: %(names)s. Write {{ and }} for braces.")
    ) % {"names": listed}


class ObserveStepsSelect(forms.NullBooleanSelect):
    """Yes / no / "decided by the effort" with words a builder understands."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.choices = [
            ("unknown", _("Decided by the reasoning effort")),
            ("true", _("Yes, review every step")),
            ("false", _("No reviews")),
        ]


class PlanningConfigForm(ServiceErrorsMixin, forms.ModelForm):
    """The full Plan-and-Act settings (ENGINE.md §2); used when planning is "custom"."""

    class Meta:
        model = PlanningConfig
        fields = [
            "reasoning_effort",
            "observe_steps",
            "max_attempts",
            "max_steps",
            "max_replans",
            "max_step_iterations",
            "step_timeout",
            "llm",
            "system_prompt",
            "plan_prompt",
            "refine_prompt",
        ]
        widgets = {
            "reasoning_effort": forms.RadioSelect,
            "observe_steps": ObserveStepsSelect,
            "system_prompt": _textarea(3),
            "plan_prompt": _textarea(4),
            "refine_prompt": _textarea(4),
        }

    def __init__(self, *args: Any, llms: QuerySet[LLM], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["llm"].queryset = llms
        self.fields["llm"].empty_label = _("The agent's LLM")
        self.fields["system_prompt"].help_text = _(
            "Empty: the built-in system prompt. Used as written."
        )
        self.fields["plan_prompt"].help_text = _placeholder_help(PLAN_PROMPT_PLACEHOLDERS)
        self.fields["refine_prompt"].help_text = _placeholder_help(REFINE_PROMPT_PLACEHOLDERS)


# How an agent works, as people choose it: one plain choice for the model's ``agent_type``, its
# ``planning`` box and its planning config (ENGINE.md §2-§4).
WORK_REACT = "react"
WORK_PLAN_ACT = "plan_act"
WORK_PLAN_EXECUTE = "plan_execute"
WORK_MODES = (
    (WORK_REACT, _("Act step by step (ReAct)")),
    (WORK_PLAN_ACT, _("Plan first, then act (Plan-and-Act)")),
    (WORK_PLAN_EXECUTE, _("Plan and execute (a plan-execute agent)")),
)
WORK_MODE_HELP = {
    WORK_REACT: _("It thinks, uses a tool, looks at the result and repeats until it has the answer. "
                  "Quick and cheap for most tasks."),
    WORK_PLAN_ACT: _("It writes a plan, carries out each step and checks its work, replanning when a step "
                     "goes wrong. Slower, for long or tricky tasks."),
    WORK_PLAN_EXECUTE: _("It lists every step in one call, runs them in order and merges the results; "
                         "a failed step fails the task."),
}


def work_mode_of(agent: Agent) -> str:
    """The choice that describes ``agent``: its type first, as the engine decides (ENGINE.md §4)."""
    if agent.agent_type == Agent.AgentType.PLAN_EXECUTE:
        return WORK_PLAN_EXECUTE
    if agent.planning or getattr(agent, "planning_config", None) is not None:
        return WORK_PLAN_ACT
    return WORK_REACT


class AgentForm(ServiceErrorsMixin, forms.ModelForm):
    """Every setting of an agent, its tools from the catalogue and its planning settings.

    The form never saves: ``service_kwargs()`` is what ``agent_create``/``agent_update`` take.
    """

    PLANNING_OFF = "off"
    PLANNING_QUICK = "quick"
    PLANNING_CUSTOM = "custom"

    work_mode = forms.ChoiceField(
        label=_("How should this agent work?"), choices=WORK_MODES, required=False, widget=forms.RadioSelect
    )
    # What ``work_mode`` sets: (agent_type, planning_mode). Plan-and-Act stores the advanced
    # settings as the agent's planning config.
    WORK_MODE_FIELDS = {
        WORK_REACT: (Agent.AgentType.REACT, PLANNING_OFF),
        WORK_PLAN_ACT: (Agent.AgentType.REACT, PLANNING_CUSTOM),
        WORK_PLAN_EXECUTE: (Agent.AgentType.PLAN_EXECUTE, PLANNING_OFF),
    }

    # The older pair ``work_mode`` replaced. A post without ``work_mode`` (an older page, a
    # script) keeps ``agent_type`` and ``planning_mode`` as posted, and what is stored when
    # they are not posted either.
    planning_mode = forms.ChoiceField(
        label=_("When to plan"),
        choices=[
            (PLANNING_OFF, _("Off: act step by step (ReAct)")),
            (PLANNING_QUICK, _("Plan before acting (quick: low effort, one attempt)")),
            (PLANNING_CUSTOM, _("Custom planning settings (below)")),
        ],
        widget=forms.RadioSelect,
        required=False,
    )

    # The page asks ``work_mode``, not the older pair: what the service says about planning goes there.
    service_error_fields = {"planning": "work_mode", "llm_id": "llm"}

    class Meta:
        model = Agent
        fields = [
            "name",
            "role",
            "goal",
            "backstory",
            "llm",
            "agent_type",
            "max_iter",
            "max_rpm",
            "max_execution_time",
            "max_retry_limit",
            "respect_context_window",
            "budget_max_tool_calls",
            "budget_max_input_tokens",
        ]
        widgets = {
            "goal": _textarea(3),
            "backstory": _textarea(4),
            "agent_type": forms.RadioSelect,
        }
        help_texts = {
            "role": _("Write {topic} for a crew input."),
            "budget_max_tool_calls": _("Empty: no limit."),
            "budget_max_input_tokens": _("Empty: no limit."),
            "max_rpm": _("Empty: no limit."),
            "max_execution_time": _("Empty: no limit."),
        }

    def __init__(
        self,
        data: Any = None,
        *,
        llms: QuerySet[LLM],
        tools: list[dict[str, Any]],
        agent: Agent | None = None,
    ) -> None:
        initial: dict[str, Any] = {"work_mode": WORK_REACT, "planning_mode": self.PLANNING_OFF}
        config = getattr(agent, "planning_config", None) if agent else None
        config_initial = forms.model_to_dict(config) if config is not None else None
        if agent is not None:
            initial = forms.model_to_dict(agent, fields=self._meta.fields)
            initial["work_mode"] = work_mode_of(agent)
            if config is not None:
                initial["planning_mode"] = self.PLANNING_CUSTOM
            elif agent.planning:
                initial["planning_mode"] = self.PLANNING_QUICK
                # What "plan before acting" means (ENGINE.md §2), so saving it keeps it.
                config_initial = {"reasoning_effort": PlanningConfig.Effort.LOW, "max_attempts": 1}
            else:
                initial["planning_mode"] = self.PLANNING_OFF
            for name in agent.tools:
                initial[f"tool_{name}"] = True
                for option, value in (agent.tool_options or {}).get(name, {}).items():
                    initial[f"tool_{name}_{option}"] = value
        super().__init__(data, initial=initial)
        self.agent = agent
        self.fields["agent_type"].required = False  # set by ``work_mode`` or kept (see above)
        self.fields["llm"].queryset = llms
        self.fields["llm"].empty_label = _("The site default")
        self.tools = tools
        for tool in tools:
            name = tool["name"]
            self.fields[f"tool_{name}"] = forms.BooleanField(
                label=_("Use %(tool)s") % {"tool": name}, required=False
            )
            self.fields[f"tool_{name}_needs_approval"] = forms.BooleanField(
                label=_("Ask a person before each use"), required=False
            )
            self.fields[f"tool_{name}_max_usage"] = forms.IntegerField(
                label=_("Most uses per task"),
                required=False,
                min_value=1,
                help_text=_("Empty: no limit."),
            )
            self.fields[f"tool_{name}_result_as_answer"] = forms.BooleanField(
                label=_("Its result is the final answer"), required=False
            )
        self.planning_form = PlanningConfigForm(
            data,
            prefix="planning",
            llms=llms,
            initial=config_initial,
        )

    def tool_rows(self) -> list[dict[str, Any]]:
        """One row per catalogue tool, with its bound fields, for the template."""
        return [
            {
                "name": tool["name"],
                "description": tool_description(tool["name"], tool["description"]),
                "use": self[f"tool_{tool['name']}"],
                "options": [
                    self[f"tool_{tool['name']}_{option}"]
                    for option in ("needs_approval", "max_usage", "result_as_answer")
                ],
            }
            for tool in self.tools
        ]

    def work_mode_choices(self) -> list[tuple[forms.BoundField, str]]:
        """The work choices with the sentence that says what each does, for the template."""
        return [(choice, WORK_MODE_HELP[choice.data["value"]]) for choice in self["work_mode"]]

    @property
    def planning_is_custom(self) -> bool:
        """Whether the advanced planning settings are in use, as chosen or as posted."""
        mode = self["work_mode"].value()
        if mode in self.WORK_MODE_FIELDS:
            return self.WORK_MODE_FIELDS[mode][1] == self.PLANNING_CUSTOM
        return self["planning_mode"].value() == self.PLANNING_CUSTOM

    @property
    def planning_errors_shown(self) -> bool:
        """The advanced planning settings have errors to show (they open for them)."""
        return self.is_bound and self.planning_is_custom and bool(self.planning_form.errors)

    def clean_agent_type(self) -> str:
        if self.cleaned_data.get("agent_type"):
            return self.cleaned_data["agent_type"]
        return self.agent.agent_type if self.agent is not None else Agent.AgentType.REACT

    def is_valid(self) -> bool:
        valid = super().is_valid()
        # The custom settings only count when chosen; otherwise their values are ignored.
        if self.is_bound and self.cleaned_data.get("planning_mode") == self.PLANNING_CUSTOM:
            valid = self.planning_form.is_valid() and valid
        return valid

    def error_summary(self) -> list[dict[str, str]]:
        entries = super().error_summary()
        if self.planning_is_custom and self.planning_form.is_bound:
            entries += self.planning_form.error_summary()
        return entries

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        mode = cleaned.get("work_mode")
        if mode:
            cleaned["agent_type"], cleaned["planning_mode"] = self.WORK_MODE_FIELDS[mode]
        tools: list[str] = []
        options: dict[str, dict[str, Any]] = {}
        for tool in self.tools:
            name = tool["name"]
            if not cleaned.get(f"tool_{name}"):
                continue
            tools.append(name)
            chosen: dict[str, Any] = {}
            if cleaned.get(f"tool_{name}_needs_approval"):
                chosen["needs_approval"] = True
            if cleaned.get(f"tool_{name}_max_usage"):
                chosen["max_usage"] = cleaned[f"tool_{name}_max_usage"]
            if cleaned.get(f"tool_{name}_result_as_answer"):
                chosen["result_as_answer"] = True
            if chosen:
                options[name] = chosen
        cleaned["tools"] = tools
        cleaned["tool_options"] = options
        return cleaned

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``agent_create`` / ``agent_update``."""
        data = {name: self.cleaned_data[name] for name in self._meta.fields}
        data["tools"] = self.cleaned_data["tools"]
        data["tool_options"] = self.cleaned_data["tool_options"]
        mode = self.cleaned_data.get("planning_mode")
        if not mode and self.agent is not None:
            return data  # neither choice posted: the stored planning stays
        data["planning"] = mode == self.PLANNING_QUICK
        data["planning_config"] = (
            {
                name: self.planning_form.cleaned_data[name]
                for name in PlanningConfigForm._meta.fields
            }
            if mode == self.PLANNING_CUSTOM
            else None
        )
        return data

    def add_service_errors(self, exc: ValidationError) -> None:
        if not hasattr(exc, "error_dict"):
            super().add_service_errors(exc)
            return
        prefix = "planning_config."
        nested = {
            k.removeprefix(prefix): v for k, v in exc.error_dict.items() if k.startswith(prefix)
        }
        rest = {k: v for k, v in exc.error_dict.items() if not k.startswith(prefix)}
        if nested:
            self.planning_form.add_service_errors(ValidationError(nested))
        if rest:
            super().add_service_errors(ValidationError(rest))


# What an admin edits of an LLM, on the site's pages and in Django's admin alike (the key apart).
LLM_FORM_FIELDS = [
    "name", "model", "api_base", "params", "context_window", "supports_tools", "rpm_limit",
    "input_price_per_1k", "output_price_per_1k", "is_default",
]


class OneDefaultLLMMixin:
    """Ticking "site default" moves the default here (``llm_set_default``) instead of failing.

    The ``one_default_llm`` constraint holds in the database; validating it on the form would
    refuse every new default while the old one is still marked.
    """

    def validate_constraints(self) -> None:
        form: Any = self
        exclude = form._get_validation_exclusions()
        exclude.add("is_default")
        try:
            form.instance.validate_constraints(exclude=exclude)
        except ValidationError as exc:
            form._update_errors(exc)


class LLMForm(OneDefaultLLMMixin, ServiceErrorsMixin, forms.ModelForm):
    """An LLM as an admin adds or edits it; a preset fills in a local server's settings.

    The form never saves: ``service_kwargs()`` is what ``llm_create``/``llm_update`` take.
    """

    preset = forms.ChoiceField(
        label=_("Preset"),
        required=False,
        choices=preset_choices,
        help_text=_("Fills in the model prefix, the server's usual address, generous timeouts and a small context window."),
    )
    api_key = forms.CharField(
        label=_("API key"),
        required=False,
        strip=True,
        # render_value=False: the stored key never comes back into the page.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Stored encrypted and never shown again. Local servers need none."),
    )
    clear_api_key = forms.BooleanField(label=_("Remove the stored key"), required=False)

    class Meta:
        model = LLM
        fields = LLM_FORM_FIELDS
        widgets = {"params": _textarea(3), "supports_tools": forms.NullBooleanSelect}
        field_classes = {"params": CheckedJSONField}  # refuses a lone surrogate or deep nesting
        help_texts = {
            "params": _("JSON: temperature, max_tokens, timeout, connect_timeout, first_token_timeout (seconds)."),
            "supports_tools": _("Unknown: Test connection finds out, else the model name decides."),
        }

    def __init__(self, data: Any = None, *, instance: LLM | None = None, initial: dict[str, Any] | None = None) -> None:
        super().__init__(data, instance=instance, initial=initial)
        self.fields["supports_tools"].widget.choices = [
            ("unknown", _("Unknown (find out)")), ("true", _("Yes")), ("false", _("No")),
        ]
        if instance is None or instance.pk is None:
            del self.fields["clear_api_key"]
        else:
            del self.fields["preset"]
            self.fields["api_key"].help_text = _("Leave empty to keep the stored key.")
        if instance is not None and instance.builtin:
            self.fields["model"].disabled = True

    def with_preset(self) -> LLMForm:
        """An unbound form holding what was typed, with the chosen preset applied."""
        values = {name: self[name].value() for name in self._meta.fields}
        params = self["params"].value()
        try:
            values["params"] = json.loads(params) if isinstance(params, str) and params.strip() else {}
        except ValueError:
            values["params"] = {}
        key = self.data.get("preset") or ""
        if key in PRESETS:
            values = preset_apply(key, values)
        values["preset"] = key
        return type(self)(initial=values)

    def service_kwargs(self) -> dict[str, Any]:
        data = {name: self.cleaned_data[name] for name in self._meta.fields if name in self.cleaned_data}
        key = self.cleaned_data.get("api_key")
        if self.cleaned_data.get("clear_api_key"):
            data["api_key"] = ""
        elif key:
            data["api_key"] = key
        if self.instance.pk and self.instance.builtin:
            data.pop("model", None)
        return data
