"""Secrets for local runs: generated once into var/ so that a restart can still read stored keys.

var/ (``PLANNER_VAR_DIR``) holds them, the SQLite database and the first sign-in: only its owner
may read it (``private_dir``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from cryptography.fernet import Fernet


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can open (0700), created so when missing, with the
    files in it made readable by the owner only (0600): the database and its -wal and -shm
    files, the local secrets, the first sign-in.

    Called at every start (settings), so a folder made by an older version, or by hand under
    a loose umask, is tightened too. Folders inside it (collected static files) keep their modes.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)  # mkdir's mode is masked by the umask
    _tighten(path, 0o700)
    for child in path.iterdir():
        if not child.is_symlink() and child.is_file():
            _tighten(child, 0o600)
    return path


def private_file(path: Path) -> Path:
    """``path`` created empty and readable by its owner only (0600) when missing, else left as
    it is. SQLite opens an empty file as a new database, keeps its mode, and gives its -wal and
    -shm files the mode of the database file."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return path


def _tighten(path: Path, mode: int) -> None:
    """Take from ``path`` any permission outside ``mode``: of a file this process owns."""
    if os.name != "posix":
        return
    info = path.lstat()
    current = stat.S_IMODE(info.st_mode)
    if info.st_uid == os.getuid() and current & ~mode:
        os.chmod(path, current & mode)


def _read_or_create(path: Path, make: callable) -> str:  # type: ignore[valid-type]
    private_dir(path.parent)
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
