"""Each knowledge operation has a URL name and an operation id of its own: the agent and the crew
variants of listing and adding sources are registered in one loop (knowledge/api.py)."""

from __future__ import annotations

from collections import Counter

from django.urls import get_resolver, reverse


def api_url_names() -> Counter[str]:
    names: Counter[str] = Counter()
    (api,) = [p for p in get_resolver().url_patterns if getattr(p, "namespace", None) == "api"]
    for pattern in api.url_patterns:
        assert not hasattr(pattern, "url_patterns"), "the API's patterns are flat"
        names[pattern.name] += 1
    return names


def test_the_agent_and_crew_source_operations_each_have_their_own_url_name():
    assert reverse("api:crew_sources", args=[3]) == reverse("api:crew_source_create", args=[3]) == (
        "/api/crews/3/knowledge"
    )
    assert reverse("api:agent_sources", args=[4]) == reverse("api:agent_source_create", args=[4]) == (
        "/api/agents/4/knowledge"
    )
    assert [name for name, count in api_url_names().items() if count > 1] == []


def test_every_operation_id_in_the_openapi_document_is_unique():
    from planner_site.api import api

    document = api.get_openapi_schema()
    ids = Counter(
        operation["operationId"] for methods in document["paths"].values() for operation in methods.values()
        if isinstance(operation, dict) and "operationId" in operation
    )

    assert ids["knowledge_api_crew_sources"] == ids["knowledge_api_agent_source_create"] == 1
    assert [i for i, count in ids.items() if count > 1] == []
