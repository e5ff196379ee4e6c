"""An LLM's key never comes back: not in any admin page or form, API response, run event or LLM
call record, audit entry, export zip or log line (DESIGN.md, Security)."""

from __future__ import annotations

import io
import logging
import zipfile
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from agents.models import LLM
from crews.models import RunEvent, RunLLMCall
from planner_site.models import AuditEvent
from planner_site.tokens import token_create
from tests.conftest import signed_in
from tests.crews.run_helpers import TaskReplies, make_crew
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture

FIRST_KEY = "sk-LEAKCHECK-first-7d1e9b2a"
SECOND_KEY = "sk-LEAKCHECK-second-40c8f3e6"
KEYS = (FIRST_KEY, SECOND_KEY, "LEAKCHECK")


def assert_no_key(where: str, text: str | bytes) -> None:
    data = text if isinstance(text, str) else text.decode("utf-8", "replace")
    found = [key for key in KEYS if key in data]
    assert not found, f"{where} holds {found}"


def llm_form(server: FakeLLMServer, key: str) -> dict[str, str]:
    return {
        "preset": "", "name": "Leaky", "model": "openai/test", "api_base": server.base_url, "api_key": key,
        "params": "{}", "context_window": "8192", "supports_tools": "unknown", "rpm_limit": "",
        "input_price_per_1k": "0.5", "output_price_per_1k": "1.5",
    }


def test_a_key_never_appears_in_pages_api_events_audit_exports_or_logs(
        admin_user: Any, builder: Any, fake_llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture,
        django_capture_on_commit_callbacks: Any) -> None:
    caplog.set_level(logging.DEBUG)
    fake_llm_server.default = TaskReplies(["Research", "Report"])
    admin = signed_in(admin_user)
    assert admin.post(reverse("agents:llm-create"), llm_form(fake_llm_server, FIRST_KEY)).status_code == 302
    llm = LLM.objects.get(name="Leaky")
    edit = llm_form(fake_llm_server, SECOND_KEY)
    assert admin.post(reverse("agents:llm-update", args=[llm.pk]), edit).status_code == 302
    admin.post(reverse("agents:llm-test", args=[llm.pk]))
    llm.refresh_from_db()
    assert llm.api_key_set and llm.input_price_per_1k == Decimal("0.5")

    # A run on that LLM, through the API with a token, as a script would.
    crew = make_crew(builder, name="Leak check", llm=llm)
    _token, raw = token_create(user=builder)
    api = signed_in(builder)
    with django_capture_on_commit_callbacks(execute=True):
        kicked = api.post(f"/api/crews/{crew.pk}/kickoff", {"inputs": {"topic": "tides"}},
                          content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert kicked.status_code == 202, kicked.content
    run_id = kicked.json()["id"]
    assert any(r.authorization == f"Bearer {SECOND_KEY}" for r in fake_llm_server.requests)  # it was used

    pages = [
        reverse("site:people-list"), reverse("site:person-invite"), reverse("site:person-detail", args=[admin_user.pk]),
        reverse("site:person-detail", args=[builder.pk]), reverse("site:usage"), reverse("site:audit-list"),
        reverse("site:token-list"), reverse("agents:llm-list"), reverse("agents:llm-create"),
        reverse("agents:llm-detail", args=[llm.pk]), reverse("agents:llm-update", args=[llm.pk]),
        reverse("agents:prompt-list"), "/api/llms", f"/api/llms/{llm.pk}",
    ]
    for url in pages:
        response = admin.get(url)
        assert response.status_code == 200, url
        assert_no_key(url, response.content)
    for url in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/events?limit=1000", reverse("crews:run-detail", args=[run_id]),
                reverse("agents:agent-detail", args=[crew.agents.get().pk])):
        response = api.get(url)
        assert response.status_code == 200, url
        assert_no_key(url, response.content)
    for layout in ("crewai-yaml", "crew-jsonc"):
        export = api.get(f"/api/crews/{crew.pk}/export", {"format": layout})
        assert export.status_code == 200
        with zipfile.ZipFile(io.BytesIO(export.getvalue())) as archive:  # a streamed file
            for name in archive.namelist():
                assert_no_key(f"{layout} export {name}", archive.read(name))

    assert RunEvent.objects.filter(run_id=run_id, type="llm.completed").exists()
    assert_no_key("run events", str(list(RunEvent.objects.values_list("data", flat=True))))
    assert_no_key("LLM call records", str(list(RunLLMCall.objects.values_list("messages", "reply", "error"))))
    audited = list(AuditEvent.objects.values_list("action", "data"))
    assert {"llm.created", "llm.key_changed", "llm.tested", "run.started"} <= {a for a, _d in audited}
    assert_no_key("audit log", str(audited))
    assert caplog.records  # the capture works
    assert_no_key("logs", "\n".join(record.getMessage() + str(record.args) + str(record.exc_text)
                                    for record in caplog.records))
