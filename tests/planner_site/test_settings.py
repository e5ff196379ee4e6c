"""Settings come from the environment; production refuses to start without its secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from planner_site.env import env_bool, env_int, env_list

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PLANNER_", "DATABASE_URL", "REDIS_URL"))}
    clean["DJANGO_SETTINGS_MODULE"] = "planner_site.settings"
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **env},
        capture_output=True, text=True, timeout=120,
    )


def production_env(tmp_path: Path) -> dict[str, str]:
    return {
        "PLANNER_PRODUCTION": "true",
        "DJANGO_SECRET_KEY": "x" * 20 + Fernet.generate_key().decode() + "y" * 20,
        "PLANNER_SECRETS_KEYS": Fernet.generate_key().decode(),
        "DJANGO_ALLOWED_HOSTS": "planner.example.com",
        "PLANNER_VAR_DIR": str(tmp_path),
    }


def test_check_deploy_is_clean_with_production_settings(tmp_path: Path) -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **production_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("missing", ["DJANGO_SECRET_KEY", "PLANNER_SECRETS_KEYS"])
def test_production_refuses_to_start_without_a_secret(tmp_path: Path, missing: str) -> None:
    env = production_env(tmp_path)
    del env[missing]
    result = manage("check", **env)
    assert result.returncode != 0
    assert f"{missing} is required when PLANNER_PRODUCTION is on" in result.stderr
    assert not (tmp_path / "secret_key").exists() and not (tmp_path / "fernet_key").exists()


def test_a_local_run_generates_its_secrets_once_and_keeps_them(tmp_path: Path) -> None:
    env = {"PLANNER_VAR_DIR": str(tmp_path)}
    assert manage("check", **env).returncode == 0
    first = (tmp_path / "secret_key").read_text(), (tmp_path / "fernet_key").read_text()
    assert manage("check", **env).returncode == 0
    assert ((tmp_path / "secret_key").read_text(), (tmp_path / "fernet_key").read_text()) == first
    assert oct((tmp_path / "fernet_key").stat().st_mode & 0o777) == "0o600"


def test_env_readers_reject_nonsense_with_the_variable_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_X", "maybe")
    with pytest.raises(ImproperlyConfigured, match="PLANNER_X must be true or false"):
        env_bool("PLANNER_X")
    monkeypatch.setenv("PLANNER_N", "ten")
    with pytest.raises(ImproperlyConfigured, match="PLANNER_N must be a whole number"):
        env_int("PLANNER_N", 1)
    monkeypatch.setenv("PLANNER_L", " a, b ,,c ")
    assert env_list("PLANNER_L", []) == ["a", "b", "c"]
    monkeypatch.setenv("PLANNER_X", "Yes")
    assert env_bool("PLANNER_X") is True
