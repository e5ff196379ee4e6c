"""Data of the agents app: LLMs (encrypted keys), prompt templates, agents, planning configs."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agents import crypto
from agents.engine.prompts import DEFAULTS as PROMPT_DEFAULTS
from agents.engine.prompts import PromptError, unknown_placeholders
from agents.engine.specs import PLAN_PROMPT_PLACEHOLDERS, REFINE_PROMPT_PLACEHOLDERS
from agents.prompt_purposes import title_of

DEMO_MODEL = "demo/offline"

# An LLM's timeouts in ``params``, in seconds (``LLMSpec``: connect, first token, whole call).
TIMEOUT_PARAMS = ("timeout", "connect_timeout", "first_token_timeout")
MAX_TIMEOUT_SECONDS = 86_400  # a day: more is a typo, not a slow model


def valid_timeout(value: object) -> bool:
    """A timeout the engine can apply: a number of seconds above 0, at most a day."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 < value <= MAX_TIMEOUT_SECONDS  # False for NaN too


class LLM(models.Model):
    name = models.CharField(_("name"), max_length=100, unique=True)
    model = models.CharField(
        _("model"),
        max_length=200,
        help_text=_("litellm model string, e.g. openai/gpt-4o-mini or ollama/llama3.2"),
    )
    api_base = models.URLField(_("API base"), blank=True)
    # Write-only: only ciphertext and the last four characters are stored.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    api_key_tail = models.CharField(max_length=4, blank=True, editable=False)
    params = models.JSONField(
        _("parameters"), default=dict, blank=True, help_text=_("temperature, max_tokens, timeout")
    )
    context_window = models.PositiveIntegerField(
        _("context window"), default=128_000, validators=[MinValueValidator(256)]
    )
    supports_tools = models.BooleanField(
        _("supports tools"), null=True, blank=True, help_text=_("Empty: decide from the model name.")
    )
    rpm_limit = models.PositiveIntegerField(
        _("requests per minute"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    input_price_per_1k = models.DecimalField(
        _("input price per 1k tokens (USD)"), max_digits=12, decimal_places=6, null=True, blank=True,
        validators=[MinValueValidator(Decimal(0))],
    )
    output_price_per_1k = models.DecimalField(
        _("output price per 1k tokens (USD)"), max_digits=12, decimal_places=6, null=True, blank=True,
        validators=[MinValueValidator(Decimal(0))],
    )
    is_default = models.BooleanField(_("site default"), default=False)
    builtin = models.BooleanField(default=False, editable=False)
    # What the model accepts, learned rather than guessed (``agents.probes``, issue #14):
    # {"forms": {"tools": true, "json_schema": false, "json_object": null, "stream": true},
    #  "context_window": 8192, "context_source": "llama.cpp", "tested_at": "...", "learned_at": "..."}
    # true = accepted, false = refused (never sent again), null or missing = unknown.
    capabilities = models.JSONField(_("capabilities"), default=dict, blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("LLM")
        verbose_name_plural = _("LLMs")
        constraints = [
            models.UniqueConstraint(fields=["is_default"], condition=Q(is_default=True), name="one_default_llm")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def api_key_set(self) -> bool:
        return bool(self.api_key_encrypted)

    @property
    def is_demo(self) -> bool:
        return self.model == DEMO_MODEL

    def accepts(self, form: str) -> bool | None:
        """True (accepted), False (refused) or None (unknown) for a request form."""
        value = ((self.capabilities or {}).get("forms") or {}).get(form)
        return value if isinstance(value, bool) else None

    @property
    def refused_forms(self) -> frozenset[str]:
        return frozenset(
            form for form, ok in ((self.capabilities or {}).get("forms") or {}).items() if ok is False
        )

    @property
    def server_context_window(self) -> int | None:
        value = (self.capabilities or {}).get("context_window")
        return value if isinstance(value, int) and value > 0 else None

    @property
    def context_window_too_large(self) -> bool:
        """The window set here is larger than the one the server said it runs with."""
        server = self.server_context_window
        return server is not None and self.context_window > server

    def set_api_key(self, raw: str | None) -> None:
        """Store ``raw`` encrypted; an empty string clears the key."""
        if not raw:
            self.api_key_encrypted = ""
            self.api_key_tail = ""
            return
        self.api_key_encrypted = crypto.encrypt(raw)
        self.api_key_tail = raw[-4:] if len(raw) >= 8 else ""

    def get_api_key(self) -> str | None:
        return crypto.decrypt(self.api_key_encrypted) if self.api_key_encrypted else None

    def clean(self) -> None:
        params = self.params or {}
        if not isinstance(params, dict):
            raise ValidationError({"params": _("Parameters must be a JSON object.")})
        allowed = {
            "temperature", "max_tokens", "timeout", "connect_timeout", "first_token_timeout",
            "top_p", "seed", "max_retries",
        }
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ValidationError(
                {"params": _("Unknown parameter(s): %(names)s.") % {"names": ", ".join(unknown)}}
            )
        for key in ("temperature", "top_p", *TIMEOUT_PARAMS):
            if key in params and (not isinstance(params[key], (int, float)) or isinstance(params[key], bool)):
                raise ValidationError({"params": _("%(key)s must be a number.") % {"key": key}})
        for key in TIMEOUT_PARAMS:
            if key in params and not valid_timeout(params[key]):
                raise ValidationError({"params": _(
                    "%(key)s must be more than 0 and at most %(max)s seconds."
                ) % {"key": key, "max": MAX_TIMEOUT_SECONDS}})
        for key in ("max_tokens", "seed", "max_retries"):
            if key in params and (not isinstance(params[key], int) or params[key] < 0):
                raise ValidationError({"params": _("%(key)s must be a whole number.") % {"key": key}})
        if "/" not in self.model and self.model != DEMO_MODEL:
            raise ValidationError(
                {"model": _("Give the provider and the model, like openai/gpt-4o-mini.")}
            )


class PromptTemplate(models.Model):
    """One prompt the engine sends; its text lives in immutable versions."""

    key = models.CharField(
        _("key"), max_length=50, unique=True, choices=[(k, d.title) for k, d in PROMPT_DEFAULTS.items()]
    )
    title = models.CharField(_("title"), max_length=100)

    class Meta:
        verbose_name = _("prompt template")
        verbose_name_plural = _("prompt templates")
        ordering = ["key"]

    def __str__(self) -> str:
        return self.display_title

    @property
    def display_title(self) -> str:
        """The title in the active language (the stored one is the English seed)."""
        return title_of(self.key, self.title)

    @property
    def placeholders(self) -> tuple[str, ...]:
        return PROMPT_DEFAULTS[self.key].placeholders


class PromptTemplateVersion(models.Model):
    template = models.ForeignKey(
        PromptTemplate, verbose_name=_("prompt template"), on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField(_("number"))
    text = models.TextField(_("text"), max_length=20_000)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("created by"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("prompt version")
        verbose_name_plural = _("prompt versions")
        ordering = ["template", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["template", "number"], name="unique_prompt_version")
        ]

    def __str__(self) -> str:
        return f"{self.template.key} v{self.number}"


class Agent(models.Model):
    class AgentType(models.TextChoices):
        REACT = "react", _("ReAct (think, act, observe)")
        PLAN_EXECUTE = "plan_execute", _("Plan, then execute")

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("owner"), on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(_("name"), max_length=100)
    role = models.CharField(_("role"), max_length=300)
    # Every free text has a ceiling (issue #16): each goes into prompts, so a megabyte pasted by
    # mistake would be sent, and paid for, on every call. Forms and the API read these limits.
    goal = models.TextField(_("goal"), max_length=4_000)
    backstory = models.TextField(_("backstory"), blank=True, max_length=8_000)
    llm = models.ForeignKey(
        LLM, verbose_name=_("LLM"), null=True, blank=True, on_delete=models.PROTECT,
        related_name="agents", help_text=_("Empty: the site default."),
    )
    tools = models.JSONField(_("tools"), default=list, blank=True)
    # Per-tool options: {"http_get": {"needs_approval": true, "max_usage": 3, "result_as_answer": false}}
    tool_options = models.JSONField(_("tool options"), default=dict, blank=True)
    agent_type = models.CharField(
        _("agent type"), max_length=20, choices=AgentType.choices, default=AgentType.REACT
    )
    max_iter = models.PositiveIntegerField(
        _("max iterations"), default=25, validators=[MinValueValidator(1)]
    )
    max_rpm = models.PositiveIntegerField(
        _("max requests per minute"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    max_execution_time = models.PositiveIntegerField(
        _("max execution time (s)"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    max_retry_limit = models.PositiveIntegerField(_("max retries"), default=2)
    respect_context_window = models.BooleanField(_("respect context window"), default=True)
    planning = models.BooleanField(
        _("plan before acting"), default=False,
        help_text=_("Same as a planning config with low effort and one attempt."),
    )
    budget_max_tool_calls = models.PositiveIntegerField(_("max tool calls"), null=True, blank=True)
    budget_max_input_tokens = models.PositiveIntegerField(
        _("max input tokens"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("agent")
        verbose_name_plural = _("agents")
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unique_agent_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from agents.tools import catalogue_names

        if not isinstance(self.tools, list) or not all(isinstance(t, str) for t in self.tools):
            raise ValidationError({"tools": _("Tools must be a list of tool names.")})
        unknown = [t for t in self.tools if t not in catalogue_names()]
        if unknown:
            raise ValidationError(
                {"tools": _("Unknown tool(s): %(names)s.") % {"names": ", ".join(unknown)}}
            )
        if len(set(self.tools)) != len(self.tools):
            raise ValidationError({"tools": _("A tool is listed twice.")})


class PlanningConfig(models.Model):
    """CrewAI's PlanningConfig for one agent (ENGINE.md §2): present means planning is on."""

    class Effort(models.TextChoices):
        LOW = "low", _("Low: follow the plan, no reviews")
        MEDIUM = "medium", _("Medium: review steps, replan on failure")
        HIGH = "high", _("High: review, refine, replan, stop early")

    agent = models.OneToOneField(
        Agent, verbose_name=_("agent"), on_delete=models.CASCADE, related_name="planning_config"
    )
    reasoning_effort = models.CharField(
        _("reasoning effort"), max_length=10, choices=Effort.choices, default=Effort.MEDIUM
    )
    observe_steps = models.BooleanField(
        _("review each step"), null=True, blank=True, help_text=_("Empty: decided by the effort.")
    )
    max_attempts = models.PositiveIntegerField(
        _("max planning attempts"), null=True, blank=True, validators=[MinValueValidator(1)],
        help_text=_("Empty: refine until ready, at most 10 attempts."),
    )
    max_steps = models.PositiveIntegerField(_("max steps"), default=20, validators=[MinValueValidator(1)])
    max_replans = models.PositiveIntegerField(_("max replans"), default=3)
    max_step_iterations = models.PositiveIntegerField(
        _("max iterations per step"), default=15, validators=[MinValueValidator(1)]
    )
    step_timeout = models.PositiveIntegerField(
        _("step timeout (s)"), null=True, blank=True, validators=[MinValueValidator(1)]
    )
    llm = models.ForeignKey(
        LLM, verbose_name=_("planning LLM"), null=True, blank=True, on_delete=models.PROTECT,
        related_name="+", help_text=_("Empty: the agent's LLM."),
    )
    system_prompt = models.TextField(_("system prompt"), blank=True, max_length=20_000)
    plan_prompt = models.TextField(_("plan prompt"), blank=True, max_length=20_000)
    refine_prompt = models.TextField(_("refine prompt"), blank=True, max_length=20_000)

    class Meta:
        verbose_name = _("planning config")
        verbose_name_plural = _("planning configs")

    def __str__(self) -> str:
        return _("planning for %(agent)s") % {"agent": self.agent}

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for field, allowed in (
            ("plan_prompt", PLAN_PROMPT_PLACEHOLDERS),
            ("refine_prompt", REFINE_PROMPT_PLACEHOLDERS),
        ):
            text = getattr(self, field)
            if not text:
                continue
            try:
                bad = unknown_placeholders(text, allowed)
            except PromptError as exc:
                errors[field] = str(exc)
                continue
            if bad:
                errors[field] = _(
                    "Unknown placeholder {%(name)s}. Allowed: %(allowed)s. Write {{ and }} for literal braces."
                ) % {"name": bad[0], "allowed": ", ".join("{" + a + "}" for a in sorted(allowed))}
        if errors:
            raise ValidationError(errors)
