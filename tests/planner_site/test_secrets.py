"""LLM keys are encrypted at rest, rotate with MultiFernet, and never reach a page."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client, override_settings

from agents import crypto, services
from agents.models import LLM

KEY = "sk-test-THIS-IS-SECRET-1234"


@pytest.fixture
def llm_with_key(admin_user: Any) -> LLM:
    return services.llm_create(actor=admin_user, name="Real", model="openai/gpt-4o-mini", api_key=KEY)


def test_the_raw_column_holds_ciphertext_not_the_key(llm_with_key: LLM) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key_encrypted, api_key_tail FROM agents_llm WHERE id = %s", [llm_with_key.pk])
        raw, tail = cursor.fetchone()
    assert KEY not in raw and "THIS-IS-SECRET" not in raw
    assert raw.startswith("gAAAA")  # a Fernet token
    assert tail == "1234"
    assert LLM.objects.get(pk=llm_with_key.pk).get_api_key() == KEY


def test_the_admin_never_renders_the_key_or_its_ciphertext(llm_with_key: LLM, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    pages = [
        client.get("/admin/agents/llm/"),
        client.get(f"/admin/agents/llm/{llm_with_key.pk}/change/"),
    ]
    for page in pages:
        assert page.status_code == 200
        body = page.content.decode()
        assert KEY not in body
        assert llm_with_key.api_key_encrypted not in body
    assert "••••1234" in pages[0].content.decode()


def test_saving_the_admin_form_without_a_key_keeps_the_stored_key(llm_with_key: LLM, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    response = client.post(
        f"/admin/agents/llm/{llm_with_key.pk}/change/",
        {"name": "Real", "model": "openai/gpt-4o-mini", "params": "{}", "context_window": 128000,
         "supports_tools": "unknown", "api_key": ""},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert LLM.objects.get(pk=llm_with_key.pk).get_api_key() == KEY


def test_rotation_reads_old_keys_and_writes_with_the_newest(llm_with_key: LLM, settings: Any) -> None:
    old_token = llm_with_key.api_key_encrypted
    new_key = Fernet.generate_key().decode()
    with override_settings(PLANNER_SECRETS_KEYS=[new_key, *settings.PLANNER_SECRETS_KEYS]):
        assert crypto.decrypt(old_token) == KEY
        rotated = crypto.rotate(old_token)
        assert Fernet(new_key.encode()).decrypt(rotated.encode()).decode() == KEY


def test_a_wrong_key_is_loud_never_returning_the_ciphertext(llm_with_key: LLM) -> None:
    wrong = override_settings(PLANNER_SECRETS_KEYS=[Fernet.generate_key().decode()])
    with wrong, pytest.raises(crypto.SecretUnreadable) as exc:
        LLM.objects.get(pk=llm_with_key.pk).get_api_key()
    assert KEY not in str(exc.value)


def test_a_short_key_shows_no_tail(admin_user: Any) -> None:
    llm = services.llm_create(actor=admin_user, name="Short", model="openai/x", api_key="abc123")
    assert llm.api_key_tail == ""
    assert llm.api_key_set


def test_processes_starting_together_on_a_fresh_folder_all_keep_the_first_key(tmp_path: Any) -> None:
    """A web process and a worker started at once must not each keep a key of their own: what
    one encrypts the other (or the next start) could not read."""
    import threading

    from planner_site.local_secrets import _read_or_create

    starting = 6
    everyone_made_one = threading.Barrier(starting)
    keys: list[str] = []

    def start(n: int) -> None:
        def make() -> str:
            everyone_made_one.wait(timeout=10)  # all of them get past the "exists?" check
            return f"key-{n}"

        keys.append(_read_or_create(tmp_path / "secret_key", make))

    threads = [threading.Thread(target=start, args=(n,)) for n in range(starting)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    stored = (tmp_path / "secret_key").read_text().strip()
    assert keys == [stored] * starting
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret_key"]  # no temporary files left
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
