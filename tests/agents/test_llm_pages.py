"""LLM pages for admins: presets on the add form, the default moving, Test connection's probes."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest
from django.urls import reverse

from agents import services
from agents.bridge import llm_spec
from agents.models import LLM
from tests.conftest import signed_in
from tests.fakes.openai_server import Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401
from tests.fakes.plain_models import answers, refuses_json_schema, refuses_tools

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
    assert "<html" not in page and 'id="llm-capabilities"' in page
    assert "The connection works" in page
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
