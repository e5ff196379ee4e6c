"""LLM pages for admins: presets on the add form, the default moving, Test connection's probes."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any

import pytest
from django.urls import reverse

from agents import services
from agents.bridge import llm_spec
from agents.models import LLM
from tests.conftest import signed_in
from tests.fakes.openai_server import Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401
from tests.fakes.plain_models import (
    answers,
    form_of,
    refuses_json_object,
    refuses_json_schema,
    refuses_tools,
)

pytestmark = pytest.mark.django_db


def llm_data(**overrides: Any) -> dict[str, Any]:
    """A complete, valid LLM form as a browser would post it."""
    data = {
        "preset": "",
        "name": "Local",
        "model": "openai/llama3.2",
        "api_base": "http://localhost:11434/v1",
        "api_key": "",
        "params": "{}",
        "context_window": "4096",
        "supports_tools": "unknown",
        "rpm_limit": "",
        "input_price_per_1k": "",
        "output_price_per_1k": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def make_llm(admin: Any, api_base: str, **fields: Any) -> LLM:
    fields.setdefault("name", "Local")
    fields.setdefault("model", "openai/llama3.2")
    fields.setdefault("context_window", 128_000)
    return services.llm_create(actor=admin, api_base=api_base, **fields)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Presets -------------------------------------------------------------------------------------


def test_choosing_a_preset_fills_the_add_form_without_javascript(admin_user: Any) -> None:
    response = signed_in(admin_user).post(
        reverse("agents:llm-create"),
        llm_data(preset="ollama", model="qwen2.5", api_base="", context_window="128000", apply_preset="1"),
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" in page
    assert 'value="openai/qwen2.5"' in page
    assert 'value="http://localhost:11434/v1"' in page
    assert 'value="4096"' in page
    assert "first_token_timeout" in page and "900" in page
    assert "errorlist" not in page  # filling in is not submitting: nothing is flagged yet
    assert not LLM.objects.filter(name="Local").exists()


@pytest.mark.parametrize(
    ("preset", "base"),
    [("llamacpp", "http://localhost:8080/v1"), ("vllm", "http://localhost:8000/v1"), ("lmstudio", "http://localhost:1234/v1")],
)
def test_with_htmx_a_preset_answers_only_the_filled_in_form(admin_user: Any, preset: str, base: str) -> None:
    response = signed_in(admin_user).post(
        reverse("agents:llm-create"), llm_data(preset=preset, model="", apply_preset="1"), HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert "<html" not in page
    assert page.lstrip().startswith("<form")
    assert f'value="{base}"' in page
    assert re.search(r'value="openai/[\w-]+"', page)


def test_an_llm_added_from_a_preset_keeps_its_timeouts(admin_user: Any) -> None:
    client = signed_in(admin_user)
    filled = client.post(reverse("agents:llm-create"), llm_data(preset="llamacpp", apply_preset="1"))
    params = re.search(r'name="params"[^>]*>([^<]*)<', filled.content.decode())
    assert params is not None
    response = client.post(
        reverse("agents:llm-create"),
        llm_data(model="openai/smollm2", api_base="http://localhost:8080/v1", params=params.group(1).replace("&quot;", '"')),
    )
    assert response.status_code == 302
    llm = LLM.objects.get(name="Local")
    assert llm.params == {"connect_timeout": 10, "first_token_timeout": 300, "timeout": 900}
    assert llm_spec(llm).timeout == 900


def test_admins_find_the_llms_from_the_navigation_and_edit_one_without_presets(admin_user: Any) -> None:
    llm = make_llm(admin_user, "http://localhost:8080/v1", api_key="sk-local-0123456789")
    client = signed_in(admin_user)
    listing = client.get(reverse("crews:crew-list")).content.decode()
    assert f'href="{reverse("agents:llm-list")}"' in listing
    page = client.get(reverse("agents:llm-list")).content.decode()
    assert reverse("agents:llm-detail", args=[llm.pk]) in page and "Not tested yet" in page
    edit = client.get(reverse("agents:llm-update", args=[llm.pk])).content.decode()
    assert 'name="preset"' not in edit and 'name="clear_api_key"' in edit
    assert "sk-local" not in edit and "0123456789" not in edit


def test_only_admins_see_the_llm_pages(builder: Any) -> None:
    client = signed_in(builder)
    assert client.get(reverse("agents:llm-list")).status_code == 403
    assert client.get(reverse("agents:llm-create")).status_code == 403


# The default moves ---------------------------------------------------------------------------


def test_adding_an_llm_as_the_default_moves_the_default(admin_user: Any) -> None:
    response = signed_in(admin_user).post(reverse("agents:llm-create"), llm_data(is_default="on"))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert list(LLM.objects.filter(is_default=True).values_list("name", flat=True)) == ["Local"]


def test_editing_an_llm_into_the_default_moves_the_default(admin_user: Any) -> None:
    llm = make_llm(admin_user, "http://localhost:11434/v1")
    response = signed_in(admin_user).post(
        reverse("agents:llm-update", args=[llm.pk]), llm_data(is_default="on"), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and response.headers["HX-Redirect"]
    assert list(LLM.objects.filter(is_default=True).values_list("name", flat=True)) == ["Local"]


def admin_form(**overrides: Any) -> dict[str, Any]:
    data = llm_data(**overrides)
    data.pop("preset")
    data["supports_tools"] = "unknown"
    return data


def test_the_django_admin_adds_a_new_default_llm(admin_user: Any) -> None:
    client = signed_in(admin_user)
    response = client.post(reverse("admin:agents_llm_add"), admin_form(is_default="on"))
    assert response.status_code == 302, re.findall(r'class="errorlist[^>]*>(.*?)</ul>', response.content.decode())
    assert list(LLM.objects.filter(is_default=True).values_list("name", flat=True)) == ["Local"]


def test_the_django_admin_makes_an_existing_llm_the_default(admin_user: Any) -> None:
    llm = make_llm(admin_user, "http://localhost:11434/v1")
    response = signed_in(admin_user).post(
        reverse("admin:agents_llm_change", args=[llm.pk]), admin_form(is_default="on")
    )
    assert response.status_code == 302, re.findall(r'class="errorlist[^>]*>(.*?)</ul>', response.content.decode())
    assert list(LLM.objects.filter(is_default=True).values_list("name", flat=True)) == ["Local"]


# Test connection -----------------------------------------------------------------------------


def test_test_connection_stores_what_the_model_accepts_and_the_page_shows_it(
    admin_user: Any, fake_llm_server: Any
) -> None:
    fake_llm_server.default = refuses_json_schema(answers("OK"))
    fake_llm_server.pages["/props"] = {"default_generation_settings": {"n_ctx": 8192}}
    llm = make_llm(admin_user, fake_llm_server.base_url)
    client = signed_in(admin_user)

    response = client.post(reverse("agents:llm-test", args=[llm.pk]), HTTP_HX_REQUEST="true")

    page = response.content.decode()
    assert "<html" not in page and "<table" in page
    status = page.split('hx-swap-oob="innerHTML:#llm-test-status"', 1)[1]
    assert "The connection works" in status
    llm.refresh_from_db()
    assert llm.capabilities["forms"] == {"stream": True, "tools": True, "json_schema": False, "json_object": True}
    assert (llm.capabilities["context_window"], llm.capabilities["context_source"]) == (8192, "llama.cpp")
    assert llm_spec(llm).refuses == frozenset({"json_schema"})
    assert llm_spec(llm).supports_tools is True  # the probe found it; the model name could not say
    detail = client.get(reverse("agents:llm-detail", args=[llm.pk])).content.decode()
    row = re.search(r"JSON schema answers.*?</tr>", detail, re.S)
    assert row is not None and "Refused" in row.group(0)
    assert "the server runs with 8192" in detail  # the row says 128000: a warning


def test_a_server_refusing_tools_is_refused_for_tools_only(admin_user: Any, fake_llm_server: Any) -> None:
    fake_llm_server.default = refuses_tools(answers("OK"), style="llama_server")
    llm = make_llm(admin_user, fake_llm_server.base_url)

    result = services.llm_test(actor=admin_user, llm=llm)

    assert result["ok"] is True
    assert result["capabilities"]["forms"]["tools"] is False
    assert result["capabilities"]["forms"]["json_schema"] is True
    assert result["capabilities"].get("context_window") is None


def test_a_probe_that_times_out_keeps_what_a_run_learned(
    admin_user: Any, fake_llm_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import probes

    monkeypatch.setattr(probes, "PROBE_SECONDS", 1.0)
    fake_llm_server.default = lambda request: (
        Reply.text("OK").after(3) if (request.body or {}).get("tools") else Reply.text("OK")
    )
    llm = make_llm(admin_user, fake_llm_server.base_url)
    services.llm_capabilities_store(llm=llm, forms={"tools": False})

    result = services.llm_test(actor=admin_user, llm=llm)

    assert result["ok"] is True
    llm.refresh_from_db()
    assert llm.capabilities["forms"]["tools"] is False  # unknown now: the refusal still stands
    assert llm.capabilities["forms"]["json_schema"] is True


def test_a_server_that_is_not_there_fails_the_test_with_a_plain_message(admin_user: Any) -> None:
    base = f"http://127.0.0.1:{unused_port()}/v1"
    llm = make_llm(admin_user, base)

    response = signed_in(admin_user).post(reverse("agents:llm-test", args=[llm.pk]))

    page = response.content.decode()
    assert "<html" in page  # without htmx: the whole page
    assert f"Could not connect to {base}" in page
    assert "litellm" not in page and "Traceback" not in page


def test_a_failing_server_error_reaches_the_page_without_paths_or_class_names(
    admin_user: Any, fake_llm_server: Any
) -> None:
    fake_llm_server.default = Reply.error(
        400, 'Model not loaded: File "/opt/llama/lib/python3.12/site-packages/llama_cpp/server/app.py", line 3'
    )
    llm = make_llm(admin_user, fake_llm_server.base_url)

    result = services.llm_test(actor=admin_user, llm=llm)

    assert result["ok"] is False
    assert "Model not loaded" in result["error"]
    assert "/opt/llama" not in result["error"] and "app.py" not in result["error"]
    assert "litellm" not in result["error"] and "Exception" not in result["error"]


def test_the_api_test_reports_the_capabilities_it_stored(admin_user: Any, fake_llm_server: Any) -> None:
    fake_llm_server.default = answers("OK")
    fake_llm_server.pages["/v1/models"] = {"data": [{"id": "llama3.2", "max_model_len": 32768}]}
    llm = make_llm(admin_user, fake_llm_server.base_url, context_window=16_000)

    response = signed_in(admin_user).post(f"/api/llms/{llm.pk}/test", content_type="application/json")

    body = response.json()
    assert response.status_code == 200
    assert body["ok"] is True and body["error"] is None and body["latency_ms"] >= 0
    assert body["capabilities"]["forms"] == {"stream": True, "tools": True, "json_schema": True, "json_object": True}
    assert body["capabilities"]["context_window"] == 32768
    assert body["capabilities"]["context_window_too_large"] is False
    assert signed_in(admin_user).get(f"/api/llms/{llm.pk}").json()["capabilities"]["context_source"] == "vLLM"


def test_the_test_result_is_announced_by_a_live_region_that_stays_in_the_page(
    admin_user: Any, fake_llm_server: Any
) -> None:
    fake_llm_server.default = answers("OK")
    llm = make_llm(admin_user, fake_llm_server.base_url)
    client = signed_in(admin_user)
    detail = client.get(reverse("agents:llm-detail", args=[llm.pk])).content.decode()
    assert '<div role="status" id="llm-test-status">' in detail
    form = detail.split(f'hx-post="{reverse("agents:llm-test", args=[llm.pk])}"', 1)[1].split(">", 1)[0]
    assert 'hx-target="#llm-capabilities-table"' in form and 'hx-swap="innerHTML"' in form

    answer = client.post(reverse("agents:llm-test", args=[llm.pk]), HTTP_HX_REQUEST="true").content.decode()

    # The region is not swapped in (it may then go unheard): only the words inside it change.
    assert 'role="status"' not in answer
    assert re.search(r'<div hx-swap-oob="innerHTML:#llm-test-status">\s*<p class="notice notice--success">'
                     r"\s*The connection works", answer)


# What was learned is about one model on one server --------------------------------------------


def learned(admin: Any) -> LLM:
    llm = make_llm(admin, "http://localhost:8080/v1")
    services.llm_capabilities_store(llm=llm, forms={"json_schema": False, "tools": True},
                                    context_window=8192, context_source="llama.cpp", tested=True)
    llm.refresh_from_db()
    return llm


@pytest.mark.parametrize(
    ("change", "forgets"),
    [
        ({"model": "openai/qwen2.5"}, True),
        ({"api_base": "http://localhost:11434/v1"}, True),
        ({"api_base": "http://localhost:8080/v1/"}, False),  # the same server
        ({"name": "Renamed", "params": '{"temperature": 0.2}'}, False),
    ],
)
def test_editing_the_model_or_its_server_forgets_what_was_learned(
    admin_user: Any, change: dict[str, str], forgets: bool
) -> None:
    llm = learned(admin_user)

    response = signed_in(admin_user).post(
        reverse("agents:llm-update", args=[llm.pk]),
        llm_data(**{"model": llm.model, "api_base": llm.api_base, "context_window": "128000", **change}),
    )

    assert response.status_code == 302
    llm.refresh_from_db()
    assert (llm.capabilities == {}) is forgets
    assert (llm_spec(llm).refuses == frozenset()) is forgets


def test_the_api_patch_of_the_model_forgets_what_was_learned(admin_user: Any) -> None:
    llm = learned(admin_user)
    client = signed_in(admin_user)

    response = client.patch(f"/api/llms/{llm.pk}", json.dumps({"model": "openai/other"}), content_type="application/json")

    assert response.status_code == 200
    assert set(response.json()["capabilities"]["forms"].values()) == {None}
    llm.refresh_from_db()
    assert llm.capabilities == {}


@pytest.mark.parametrize(("field", "value"), [("model", "openai/qwen2.5"), ("api_base", "http://10.0.0.5:8080/v1")])
def test_the_django_admin_forgets_what_was_learned_when_the_model_or_server_changes(
    admin_user: Any, field: str, value: str
) -> None:
    llm = learned(admin_user)
    kept = make_llm(admin_user, "http://localhost:8080/v1", name="Twin")
    services.llm_capabilities_store(llm=kept, forms={"tools": False})
    client = signed_in(admin_user)

    response = client.post(reverse("admin:agents_llm_change", args=[llm.pk]),
                           admin_form(**{"model": llm.model, "api_base": llm.api_base, field: value}))
    renamed = client.post(reverse("admin:agents_llm_change", args=[kept.pk]),
                          admin_form(name="Twin 2", model=kept.model, api_base=kept.api_base))

    assert response.status_code == 302 and renamed.status_code == 302
    llm.refresh_from_db()
    kept.refresh_from_db()
    assert llm.capabilities == {}
    assert kept.capabilities["forms"] == {"tools": False}


# Timeouts --------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", ['{"timeout": 0}', '{"first_token_timeout": -1}', '{"connect_timeout": 1e9}'])
def test_the_form_refuses_a_timeout_out_of_range_naming_it(admin_user: Any, params: str) -> None:
    response = signed_in(admin_user).post(reverse("agents:llm-create"), llm_data(params=params))

    assert response.status_code == 200
    key = next(iter(json.loads(params)))
    assert f"{key} must be more than 0 and at most 86400 seconds." in response.content.decode()
    assert not LLM.objects.filter(name="Local").exists()


def test_a_row_stored_with_bad_timeouts_still_tests_and_runs_on_the_defaults(
    admin_user: Any, fake_llm_server: Any
) -> None:
    fake_llm_server.default = answers("OK")
    llm = make_llm(admin_user, fake_llm_server.base_url)
    bad = {"timeout": 0, "connect_timeout": -3, "first_token_timeout": "soon", "max_retries": 99, "temperature": 0.1}
    LLM.objects.filter(pk=llm.pk).update(params=bad)  # as a row saved before the check existed
    llm.refresh_from_db()

    spec = llm_spec(llm)
    response = signed_in(admin_user).post(reverse("agents:llm-test", args=[llm.pk]))

    assert (spec.connect_timeout, spec.first_token_timeout, spec.timeout, spec.max_retries) == (10.0, 60.0, 600.0, 10)
    assert spec.params == {"temperature": 0.1}
    assert response.status_code == 200 and "The connection works" in response.content.decode()


# Test connection on local servers ----------------------------------------------------------


def test_a_cold_single_slot_server_passes_the_test(
    admin_user: Any, fake_llm_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama or llama.cpp loading the model: the first request waits longer than a form probe's
    limit, and the server answers one request at a time. The plain probe goes first, alone, with
    the LLM's own first-token limit; the forms after it."""
    from agents import probes

    monkeypatch.setattr(probes, "PROBE_SECONDS", 1.0)
    loaded: list[float] = []

    def cold(request: Any) -> Reply:
        if not loaded:
            loaded.append(time.monotonic())
            return Reply.text("OK").after(2)  # loading the model
        return Reply.text("OK")

    fake_llm_server.default = cold
    llm = make_llm(admin_user, fake_llm_server.base_url, params={"first_token_timeout": 30})

    result = services.llm_test(actor=admin_user, llm=llm)

    assert result["ok"] is True, result["error"]
    assert result["capabilities"]["forms"] == {"stream": True, "tools": True, "json_schema": True, "json_object": True}
    completions = [r for r in fake_llm_server.requests if r.path.endswith("/chat/completions")]
    assert form_of(completions[0]) == "plain" and not (completions[0].body or {}).get("stream")
    assert all(r.at >= loaded[0] + 1.5 for r in completions[1:])  # the forms waited for the plain answer


def test_the_plain_probe_waits_for_the_llms_first_token_at_most_two_minutes_and_the_forms_briefly(
    admin_user: Any,
) -> None:
    import asyncio

    from agents.engine.llm import LLMResponse
    from agents.probes import PROBE_SECONDS, probe

    seen: list[tuple[str, float, float]] = []

    class Recording:
        async def complete(self, request: Any, **kw: Any) -> LLMResponse:
            seen.append((request.purpose, request.llm.first_token_timeout, request.llm.timeout))
            return LLMResponse(content="OK")

    slow = llm_spec(make_llm(admin_user, "http://localhost:1/v1", params={"first_token_timeout": 900}))
    quick = llm_spec(make_llm(admin_user, "http://localhost:1/v1", name="Quick", params={"first_token_timeout": 30}))

    assert asyncio.run(probe(slow, Recording())).ok
    assert seen[0] == ("test", 120.0, 120.0 + PROBE_SECONDS)
    assert len(seen) == 5 and {(f, t) for _purpose, f, t in seen[1:]} == {(PROBE_SECONDS, PROBE_SECONDS)}
    seen.clear()
    assert asyncio.run(probe(quick, Recording())).ok
    assert seen[0] == ("test", 30.0, 30.0 + PROBE_SECONDS)


def test_lm_studios_refusal_of_json_object_is_recognised(admin_user: Any, fake_llm_server: Any) -> None:
    fake_llm_server.default = refuses_json_object(answers("OK"))
    llm = make_llm(admin_user, fake_llm_server.base_url)

    result = services.llm_test(actor=admin_user, llm=llm)

    assert result["ok"] is True
    assert result["capabilities"]["forms"] == {"stream": True, "tools": True, "json_schema": True, "json_object": False}
    sent = [r.body for r in fake_llm_server.requests if form_of(r) == "json_object"]
    assert len(sent) == 1 and sent[0]["response_format"] == {"type": "json_object"}
    assert "extra_body" not in sent[0]


# Navigation --------------------------------------------------------------------------------


def test_the_llm_links_follow_the_admin_role_not_the_staff_flag(admin_user: Any, builder: Any) -> None:
    from django.contrib.auth.models import Group

    from planner_site.roles import ADMIN

    builder.is_staff = True  # staff, but a builder: the LLM pages answer 403
    builder.save()
    admin_user.is_staff = admin_user.is_superuser = False  # the admin role, not staff
    admin_user.save()
    admin_user.groups.set([Group.objects.get(name=ADMIN)])
    llms = f'href="{reverse("agents:llm-list")}"'

    as_builder = signed_in(builder).get(reverse("crews:crew-list")).content.decode()
    as_admin = signed_in(admin_user).get(reverse("crews:crew-list")).content.decode()

    assert "Demo mode." in as_builder and "Demo mode." in as_admin  # the banner's link too
    assert llms not in as_builder
    assert as_admin.count(llms) == 2  # the navigation and the banner
    assert signed_in(admin_user).get(reverse("agents:llm-list")).status_code == 200
