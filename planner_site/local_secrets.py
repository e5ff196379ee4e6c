"""Secrets for local runs: generated once into var/ so that a restart can still read stored keys."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet


def _read_or_create(path: Path, make: callable) -> str:  # type: ignore[valid-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        return path.read_text().strip()
    # Write privately (mkstemp: mode 0600) under a name of our own, then link it into place only
    # if nobody has: a half-written key is never seen, and processes starting at once on a fresh
    # folder (a web process and a worker) all keep the first key written, never one each.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as file:
            file.write(make() + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    return path.read_text().strip()


def local_secret_key(var_dir: Path) -> str:
    return _read_or_create(var_dir / "secret_key", lambda: secrets.token_urlsafe(50))


def local_fernet_keys(var_dir: Path) -> list[str]:
    return [_read_or_create(var_dir / "fernet_key", lambda: Fernet.generate_key().decode())]
