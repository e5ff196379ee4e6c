"""ORM rows to engine specs: what an LLM row's params become in its ``LLMSpec``."""

from __future__ import annotations

from agents.bridge import llm_spec
from agents.models import LLM


def test_an_llms_timeouts_come_from_its_params_and_the_rest_keep_their_defaults() -> None:
    local = llm_spec(
        LLM(
            model="openai/local",
            supports_tools=True,
            params={"first_token_timeout": 300, "timeout": 900, "temperature": 0.2},
        )
    )
    hosted = llm_spec(LLM(model="openai/gpt-4o-mini", supports_tools=True))

    assert (local.connect_timeout, local.first_token_timeout, local.timeout) == (10.0, 300.0, 900.0)
    # The timeouts are the gateway's to apply, not parameters for litellm to pass on.
    assert local.params == {"temperature": 0.2}
    assert (hosted.connect_timeout, hosted.first_token_timeout, hosted.timeout) == (
        10.0,
        60.0,
        600.0,
    )


def test_llm_rows_reads_the_default_and_the_asked_llms_as_the_orm_would(db: object) -> None:
    """Compiled once per number of ids (``_llm_rows_read``): the same rows as the queryset."""
    from django.db.models import Q

    from agents.bridge import llm_rows

    default = LLM.objects.create(name="Default", model="openai/d", is_default=True)
    others = [LLM.objects.create(name=f"L{n}", model=f"openai/m{n}", params={"timeout": 30 + n}) for n in range(3)]
    for ids in ([], [others[0].pk], [o.pk for o in others], [others[1].pk, others[1].pk, 10**9]):
        found_default, rows = llm_rows(ids)
        expected = {r.pk: r for r in LLM.objects.filter(Q(is_default=True) | Q(pk__in=ids))}
        assert found_default == default
        assert rows.keys() == expected.keys()
        assert [(r.name, r.model, r.params, r.is_default) for r in rows.values()] == [
            (r.name, r.model, r.params, r.is_default) for r in (expected[k] for k in rows)]
