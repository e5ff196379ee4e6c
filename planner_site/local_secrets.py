"""Secrets for local runs: generated once into var/ so that a restart can still read stored keys."""

from __future__ import annotations

import secrets
from pathlib import Path

from cryptography.fernet import Fernet


def _read_or_create(path: Path, make: callable) -> str:  # type: ignore[valid-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        return path.read_text().strip()
    value = make()
    # Write privately and atomically: a half-written key would make stored LLM keys unreadable.
    tmp = path.with_suffix(".tmp")
    tmp.write_text(value + "\n")
    tmp.chmod(0o600)
    tmp.replace(path)
    return value


def local_secret_key(var_dir: Path) -> str:
    return _read_or_create(var_dir / "secret_key", lambda: secrets.token_urlsafe(50))


def local_fernet_keys(var_dir: Path) -> list[str]:
    return [_read_or_create(var_dir / "fernet_key", lambda: Fernet.generate_key().decode())]
