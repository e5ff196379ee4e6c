"""Provider failures in plain words: each kind (``agents.engine.failures``) as people read it.

The engine's messages stay English in events and stored errors; pages word them by kind here,
in the reader's language, with what to do next. ``failure_view`` is what
``templates/agents/_llm_failure.html`` shows: the plain message, a link to the LLM's page for
admins, and the raw error one click away.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q
from django.urls import reverse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from agents.bridge import llm_spec
from agents.engine.failures import KINDS, OTHER, kind_of_message
from agents.engine.specs import LLMSpec
from agents.models import LLM

MESSAGES: dict[str, tuple[Promise, Promise]] = {
    "auth": (
        _("The provider refused the API key."),
        _("The key is wrong, missing, expired or has no access to this model. An admin can enter a valid key on the LLM's page."),
    ),
    "model_not_found": (
        _("The provider does not know this model."),
        _("Check the model name (like openai/gpt-4o-mini) and, for a local server, that the model is pulled or loaded."),
    ),
    "endpoint_not_found": (
        _("The LLM's server has nothing at this address (404)."),
        _("The server answered, but not at this path: check the LLM's API base. An OpenAI-compatible server usually needs it to end in /v1 (like http://localhost:11434/v1)."),
    ),
    "rate_limited": (
        _("The provider is limiting requests (rate limit)."),
        _("Too many requests in a short time: try again in a minute, or set a lower requests-per-minute limit on the LLM."),
    ),
    "quota": (
        _("The provider account has no quota or credit left."),
        _("Add credit or raise the quota in the provider's billing settings, or switch to another LLM."),
    ),
    "context_too_long": (
        _("The request is longer than the model's context window."),
        _("Shorten the task texts or inputs, use a model with a larger context window, or check the LLM's context window setting."),
    ),
    "unreachable": (
        _("The LLM's server could not be reached."),
        _("Nothing answered at its address within %(seconds)s seconds. Check that the server is running and that the API base is right.")
    ),
    "timeout": (
        _("The model took too long to answer."),
        _("The server answered too slowly (a model still loading, or an overloaded server). Try again, or raise the LLM's timeouts."),
    ),
    "content_filter": (
        _("The provider's content filter refused the request."),
        _("The provider judged the prompt or the answer against its policy. Reword the task or its inputs."),
    ),
    "server_error": (
        _("The provider had an internal error."),
        _("The problem is on the provider's side. Try again in a few minutes."),
    ),
    "other": (
        _("The LLM call failed."),
        _("The provider's error below says why."),
    ),
}
assert set(MESSAGES) == set(KINDS)


def failure_kind(*, error: str, kind: str | None = None) -> str:
    """The kind an event gave, else what the message tells."""
    return kind if kind in MESSAGES else kind_of_message(error or "")


def connect_seconds(llm: LLM | None) -> float:
    """How long a run or a drafting waits for a host that does not take the connection: one
    connect timeout (``LLMSpec.connect_timeout``, 10 s unless the LLM's parameters say
    otherwise), never retried (``agents.engine.calls``)."""
    return llm_spec(llm).connect_timeout if llm is not None else LLMSpec.model_fields["connect_timeout"].default


def _llm_of(model: str, llm_ids: Iterable[int] | None) -> LLM | None:
    """The LLM that made a failed call with ``model``: among ``llm_ids`` (a run's LLMs) first, else
    the site default if it has that model. Without ids, any LLM with that model, the default first."""
    rows = LLM.objects.filter(model=model)
    if llm_ids is None:
        return rows.order_by("-is_default", "pk").first()
    ids = set(llm_ids)
    found = list(rows.filter(Q(pk__in=ids) | Q(is_default=True)).order_by("pk"))
    return next((r for r in found if r.pk in ids), None) or next((r for r in found if r.is_default), None)


def failure_view(*, error: str, kind: str | None = None, llm: LLM | None = None,
                 model: str | None = None, llm_ids: Iterable[int] | None = None,
                 seconds: float | None = None) -> dict[str, Any]:
    """What ``agents/_llm_failure.html`` shows for ``error`` (raw, English, key-free). The LLM is
    ``llm`` when the caller knows it (a plan's), else the one of ``llm_ids`` (a run's LLMs) with
    ``model``: another LLM that happens to share the model string is not the one that failed."""
    found = failure_kind(error=error, kind=kind)
    if llm is None and model:
        llm = _llm_of(model, llm_ids)
    title, advice = MESSAGES[found]
    if found == "unreachable":
        wait = seconds if seconds is not None else connect_seconds(llm)
        advice = advice % {"seconds": f"{wait:g}"}  # type: ignore[assignment]
    return {
        "kind": found,
        "title": title,
        "advice": advice,
        "raw": error,
        "llm": llm,
        "llm_url": reverse("agents:llm-detail", args=[llm.pk]) if llm is not None and not llm.is_demo else "",
        "is_provider_failure": found != OTHER,
    }
