"""Writes of the agents app: LLMs and their keys, prompt templates, agents and planning configs."""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError, UniqueConstraint
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.engine.capabilities import Capabilities
from agents.engine.prompts import DEFAULTS as PROMPT_DEFAULTS
from agents.engine.prompts import PromptError, validate_template
from agents.models import (
    DEMO_MODEL,
    LLM,
    Agent,
    PlanningConfig,
    PromptTemplate,
    PromptTemplateVersion,
)
from planner_site.audit import audit
from planner_site.body_checks import check_text_ceilings
from planner_site.errors import Conflict, Forbidden
from planner_site.roles import can_build, is_admin

if TYPE_CHECKING:
    from agents.engine.llm import Gateway

logger = logging.getLogger(__name__)
_UNSET: Any = object()
LLM_FIELDS = (
    "name", "model", "api_base", "params", "supports_tools", "context_window", "rpm_limit",
    "input_price_per_1k", "output_price_per_1k",
)
AGENT_FIELDS = (
    "name", "role", "goal", "backstory", "llm", "llm_id", "tools", "tool_options", "agent_type",
    "max_iter", "max_rpm", "max_execution_time", "max_retry_limit", "respect_context_window", "planning",
    "budget_max_tool_calls", "budget_max_input_tokens",
)
PLANNING_FIELDS = (
    "reasoning_effort", "observe_steps", "max_attempts", "max_steps", "max_replans",
    "max_step_iterations", "step_timeout", "llm", "llm_id", "system_prompt", "plan_prompt",
    "refine_prompt",
)


def _require_admin(actor: Any) -> None:
    if not is_admin(actor):
        raise Forbidden(_("Only an admin can change LLMs and prompts."))


def _unique_taken(obj: Any, field: str) -> bool:
    """Another row holds ``obj``'s value of ``field`` where the field, or a unique constraint
    with it (an owner's agent names), must be unique."""
    meta = obj._meta
    groups = [[field]] if meta.get_field(field).unique else []
    groups += [list(c.fields) for c in meta.constraints if isinstance(c, UniqueConstraint) and field in c.fields]
    manager = type(obj)._default_manager
    for group in groups:
        values = {meta.get_field(name).attname: getattr(obj, meta.get_field(name).attname) for name in group}
        if manager.filter(**values).exclude(pk=obj.pk).exists():
            return True
    return False


def _save(obj: Any, *, unique_field: str = "name", exclude: list[str] | None = None) -> None:
    obj.full_clean(exclude=exclude)
    check_text_ceilings(obj)
    try:
        with transaction.atomic():
            obj.save()
    except IntegrityError as exc:
        # Only a name taken (in the meantime) is that sentence; anything else is said for what it is.
        if _unique_taken(obj, unique_field):
            raise ValidationError({unique_field: _("This name is already taken.")}) from None
        logger.warning("%s could not be stored: %s", type(obj).__name__, exc)
        raise ValidationError(_("The database refused these values; nothing was saved.")) from None


# LLMs ----------------------------------------------------------------------------------------


@transaction.atomic
def llm_create(*, actor: Any, api_key: str | None = None, is_default: bool = False, **fields: Any) -> LLM:
    """Admins add LLMs; the key is stored encrypted and never read back out."""
    _require_admin(actor)
    llm = LLM(**{k: v for k, v in fields.items() if k in LLM_FIELDS})
    llm.set_api_key(api_key)
    _save(llm)
    if is_default:
        llm_set_default(actor=actor, llm=llm)
    audit(actor=actor, action="llm.created", target=llm, model=llm.model, key_set=llm.api_key_set)
    return llm


@transaction.atomic
def llm_update(*, actor: Any, llm: LLM, api_key: str | None = _UNSET, is_default: bool | None = None, **fields: Any) -> LLM:
    """Omitting ``api_key`` keeps the stored key; an empty string clears it."""
    _require_admin(actor)
    if llm.builtin and "model" in fields and fields["model"] != llm.model:
        raise ValidationError({"model": _("The built-in demo model cannot change its model.")})
    # As stored: a form may have written the posted values onto ``llm`` already.
    stored = LLM.objects.filter(pk=llm.pk).only("model", "api_base").first()
    before = llm_server_identity(stored) if stored is not None else None
    for key, value in fields.items():
        if key in LLM_FIELDS:
            setattr(llm, key, value)
    if before is not None and llm_server_identity(llm) != before:
        # Another model or server: what was learned about the old one says nothing about it.
        llm.capabilities = {}
    if api_key is not _UNSET:
        llm.set_api_key(api_key)
        audit(actor=actor, action="llm.key_changed" if api_key else "llm.key_cleared", target=llm)
    if is_default:
        # The default moves before this row is saved as it: a form may have marked it already,
        # and the one_default_llm constraint allows one marked row at a time.
        LLM.objects.filter(is_default=True).exclude(pk=llm.pk).update(is_default=False)
        audit(actor=actor, action="llm.default_set", target=llm)
    if is_default is not None:
        llm.is_default = is_default
    _save(llm)
    audit(actor=actor, action="llm.updated", target=llm, fields=sorted(fields))
    return llm


def llm_server_identity(llm: LLM) -> tuple[str, str]:
    """What the capabilities an LLM row stores are about: its model on its server. When either
    changes (``llm_update``, the Django admin) the stored capabilities are cleared."""
    return (llm.model or "").strip(), (llm.api_base or "").strip().rstrip("/")


@transaction.atomic
def llm_set_default(*, actor: Any, llm: LLM) -> LLM:
    """Exactly one LLM is the site default; it plans and runs whatever names no LLM."""
    _require_admin(actor)
    LLM.objects.filter(is_default=True).exclude(pk=llm.pk).update(is_default=False)
    if not llm.is_default:
        llm.is_default = True
        llm.save(update_fields=["is_default"])
    audit(actor=actor, action="llm.default_set", target=llm)
    return llm


def llm_delete(*, actor: Any, llm: LLM) -> None:
    """An LLM still used by an agent, a crew or a planning config cannot be deleted."""
    _require_admin(actor)
    if llm.builtin:
        raise Conflict(_("The built-in demo model cannot be deleted."), code="builtin")
    if llm.is_default:
        raise Conflict(_("Choose another default LLM before deleting this one."), code="in_use")
    try:
        with transaction.atomic():
            audit(actor=actor, action="llm.deleted", target=llm, name=llm.name)
            llm.delete()
    except ProtectedError:
        raise Conflict(_("This LLM is still used by agents or crews."), code="in_use") from None


def llm_test(*, actor: Any, llm: LLM, gateway: Gateway | None = None) -> dict[str, Any]:
    """Probe what the LLM accepts (plain, streamed, tools, ``json_schema``, ``json_object``) and
    the context window its server runs, and store it: runs then never send a refused form.

    A failed plain completion fails the test with a plain message (no key, no traceback, no
    server file path) and teaches nothing about the forms: their probes failed for the same reason.
    """
    import asyncio

    from agents.bridge import llm_spec
    from agents.engine.gateway import RoutingGateway
    from agents.probes import probe

    _require_admin(actor)
    result = asyncio.run(probe(llm_spec(llm), gateway or RoutingGateway()))
    forms = result.forms if result.ok else {}
    llm_capabilities_store(llm=llm, forms=forms, context_window=result.context_window,
                           context_source=result.context_source, tested=True)
    audit(actor=actor, action="llm.tested", target=llm, ok=result.ok)
    return {
        "ok": result.ok,
        "latency_ms": result.latency_ms,
        "error": result.error,
        "kind": result.kind,
        "capabilities": llm.capabilities,
    }


@transaction.atomic
def llm_capabilities_store(
    *,
    llm: LLM,
    forms: dict[str, bool | None],
    context_window: int | None = None,
    context_source: str | None = None,
    tested: bool = False,
) -> LLM:
    """What an LLM accepts, as a test found it or a run learned it (``forms``: form → accepted).

    What a test found replaces what was known (the server or its model may have changed); what it
    could not find out (a probe timed out) stays as it was.
    """
    row = LLM.objects.select_for_update().get(pk=llm.pk)
    known = dict(row.capabilities or {})
    now = timezone.now().isoformat()
    found = {form: ok for form, ok in forms.items() if ok is not None}
    known["forms"] = {**(known.get("forms") or {}), **found}
    if tested:
        known["tested_at"] = now
        if context_window:
            known.update(context_window=context_window, context_source=context_source)
    else:
        known["learned_at"] = now
    LLM.objects.filter(pk=llm.pk).update(capabilities=known)
    llm.capabilities = known
    return llm


def llm_capability_learned(*, llm_key: str, form: str) -> None:
    """A refusal met during a run is kept on the LLM, so no later run sends that form again."""
    pk = llm_key.removeprefix("llm-")
    llm = LLM.objects.filter(pk=int(pk)).first() if pk.isdigit() else None
    if llm is not None and llm.accepts(form) is not False:
        llm_capabilities_store(llm=llm, forms={form: False})


def llm_capabilities_memo() -> Capabilities:
    """A ``Capabilities`` memo for one run or draft that stores every refusal it learns."""
    store = sync_to_async(llm_capability_learned)

    async def on_learned(llm: Any, form: str) -> None:
        await store(llm_key=llm.key, form=form)

    return Capabilities(on_learned=on_learned)


def llm_ensure_demo() -> LLM:
    """The offline demo model exists on every install, and is the default until an admin picks one."""
    llm, _created = LLM.objects.get_or_create(
        model=DEMO_MODEL, builtin=True,
        defaults={"name": "Offline demo model", "context_window": 32_000, "supports_tools": True},
    )
    if not LLM.objects.filter(is_default=True).exists():
        LLM.objects.filter(pk=llm.pk).update(is_default=True)
        llm.refresh_from_db()
    return llm


# Prompt templates ----------------------------------------------------------------------------


# Default texts a release replaced (SHA-256 of the text, by key). A template whose newest version
# is still one of them was never edited by an admin: seeding moves it on to today's default.
RETIRED_DEFAULTS: dict[str, frozenset[str]] = {
    # Session 6 (issue #12): the observe prompt gets success criteria and the steps done so far,
    # synthesis does not mention steps, a step says what it is for, plan-execute steps see the
    # task, and the manager's persona comes from its template.
    "observe": frozenset({"fe1c36c732fdd67faf50dcb8352c1723483b08c0b524885f08fd9e00e34ff1b6"}),
    "step_executor": frozenset({"093d33152975f82f9494d70fdc68baa0f32925057b07c33e3877fc6fe3d0b1a4"}),
    "synthesis": frozenset({"3e4690a134509967c11acf8796742da8454248b0a6622df7e094d02c0f8208e8"}),
    "plan_execute_step": frozenset({"54b95fa4ec2ae853099700c76834883744f03228cc34b04a5e7a9e29884ed29a"}),
    "plan_execute_aggregate": frozenset({"bddb7202efd7aad75de0f41944fa641217b3d9d5b8a10858dd1f5e092419f532"}),
    "manager": frozenset({"475f72fb3cb53a9216faf049c32ebc208e1b3eaa4695cbfe85549be8febaf329"}),
    # Issue #14: an agent without tools is asked for no format; its reply is the answer.
    "react_system_no_tools": frozenset({"1ac1eb5bf8d497889da375133f890fdad73cdf0eecc595ef23a4c36a79a3a304"}),
}


def prompt_seed() -> int:
    """Create a template with its default text as version 1 for every prompt the engine sends,
    and move templates nobody edited from a retired default to today's (a new version)."""
    created = 0
    for key, definition in PROMPT_DEFAULTS.items():
        template, _new = PromptTemplate.objects.get_or_create(key=key, defaults={"title": definition.title})
        newest = template.versions.order_by("-number").first()
        if newest is None:
            PromptTemplateVersion.objects.create(template=template, number=1, text=definition.text)
            created += 1
        elif hashlib.sha256(newest.text.encode()).hexdigest() in RETIRED_DEFAULTS.get(key, ()):
            PromptTemplateVersion.objects.create(template=template, number=newest.number + 1, text=definition.text)
            created += 1
    return created


@transaction.atomic
def prompt_update(*, actor: Any, key: str, text: str, note: str = "",
                  origin: dict[str, Any] | None = None) -> PromptTemplateVersion:
    """Saving a prompt adds a version; earlier versions never change. The note (why) is kept
    in the audit log beside the version number."""
    from agents.selectors import prompt_get

    _require_admin(actor)
    template, current = prompt_get(key=key)
    if not text.strip():
        raise ValidationError({"text": _("The prompt text cannot be empty.")})
    check_text_ceilings(PromptTemplateVersion(template=template, text=text))
    try:
        validate_template(key, text)
    except PromptError as exc:
        raise ValidationError({"text": str(exc)}) from None
    version = PromptTemplateVersion.objects.create(
        template=template, number=current.number + 1, text=text, created_by=actor
    )
    # ``origin``: a restore's {"restored_from": n} or a reset's {"reset": true}, worded by the pages.
    audit(actor=actor, action="prompt.updated", target=template, version=version.number, note=note.strip()[:500],
          **(origin or {}))
    return version


def prompt_restore(*, actor: Any, key: str, number: int) -> PromptTemplateVersion:
    """Restoring an old version saves its text as a new version."""
    from agents.selectors import prompt_versions

    old = prompt_versions(key=key).filter(number=number).first()
    if old is None:
        from planner_site.errors import NotFound

        raise NotFound(_("Prompt %(key)s has no version %(n)s.") % {"key": key, "n": number})
    return prompt_update(actor=actor, key=key, text=old.text, origin={"restored_from": number})


def prompt_reset(*, actor: Any, key: str) -> PromptTemplateVersion:
    """Resetting a prompt saves the engine's default text as a new version."""
    if key not in PROMPT_DEFAULTS:
        from planner_site.errors import NotFound

        raise NotFound(_("No prompt template %(key)s.") % {"key": key})
    return prompt_update(actor=actor, key=key, text=PROMPT_DEFAULTS[key].text, origin={"reset": True})


# Agents --------------------------------------------------------------------------------------


def _require_builder(actor: Any) -> None:
    if not can_build(actor):
        raise Forbidden(_("Your role cannot create or change agents and crews."))


def _apply_planning(agent: Agent, planning_config: dict[str, Any] | None) -> None:
    # Keep the agent's cached config in step, so callers can render the agent they get back.
    cache = Agent._meta.get_field("planning_config")
    if planning_config is None:
        PlanningConfig.objects.filter(agent=agent).delete()
        cache.set_cached_value(agent, None)
        return
    config = PlanningConfig.objects.filter(agent=agent).first() or PlanningConfig(agent=agent)
    for key, value in planning_config.items():
        if key in PLANNING_FIELDS:
            setattr(config, key, "" if value is None and key.endswith("prompt") else value)
    try:
        config.full_clean()
        check_text_ceilings(config)
    except ValidationError as exc:
        raise ValidationError({f"planning_config.{k}": v for k, v in exc.message_dict.items()}) from None
    config.save()
    cache.set_cached_value(agent, config)


@transaction.atomic
def agent_create(*, actor: Any, planning_config: dict[str, Any] | None = None, **fields: Any) -> Agent:
    """Builders create agents they own."""
    _require_builder(actor)
    agent = Agent(owner=actor, **{k: v for k, v in fields.items() if k in AGENT_FIELDS})
    _save(agent, exclude=["owner"])
    if planning_config is not None:
        _apply_planning(agent, planning_config)
    return agent


@transaction.atomic
def agent_update(*, actor: Any, agent: Agent, planning_config: dict[str, Any] | None = _UNSET, **fields: Any) -> Agent:
    """``planning_config=None`` turns planning off; omitting it keeps it."""
    _require_builder(actor)
    for key, value in fields.items():
        if key in AGENT_FIELDS:
            setattr(agent, key, value)
    _save(agent, exclude=["owner"])
    if planning_config is not _UNSET:
        _apply_planning(agent, planning_config)
    return agent


def agent_delete(*, actor: Any, agent: Agent) -> None:
    """An agent goes with its own runs; the crews app refuses while one of them works (a
    ``Conflict`` naming it, sent by its ``pre_delete`` receiver)."""
    _require_builder(actor)
    with transaction.atomic():  # a refusal rolls back to here, not the caller's transaction
        agent.delete()
