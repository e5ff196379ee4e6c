"""``llm_failure``: a stored or streamed provider error as ``agents/_llm_failure.html`` shows it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template

from agents import selectors
from agents.failures import failure_view
from agents.models import LLM

register = template.Library()


@register.simple_tag
def llm_failure(error: str, kind: str | None = None, model: str | None = None, llm: LLM | None = None,
                llm_ids: Iterable[int] | None = None) -> dict[str, Any]:
    """``{% llm_failure error kind model llm_ids=... as failure %}``: the kind from the event when
    it has one, else read from the error (only ever an LLM call's error); the LLM named by ``llm``,
    by ``model`` among ``llm_ids`` (the run's LLMs), else the site default."""
    if llm is None and not model:
        llm = selectors.llm_default()
    return failure_view(error=str(error or ""), kind=kind, model=model, llm=llm, llm_ids=llm_ids)
