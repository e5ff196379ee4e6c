"""var/ (PLANNER_VAR_DIR) and what it holds, the SQLite database above all, are the owner's alone."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from planner_site.local_secrets import private_dir, private_file
from tests.planner_site.test_settings import manage


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_migrate_on_a_fresh_folder_leaves_only_owner_readable_files(tmp_path: Path) -> None:
    var = tmp_path / "var"
    old = os.umask(0o022)  # what a shell usually has: files 0644, folders 0755
    try:
        result = manage("migrate", "--no-input", PLANNER_VAR_DIR=str(var))
    finally:
        os.umask(old)

    assert result.returncode == 0, result.stdout + result.stderr
    assert mode(var) == 0o700
    files = sorted(p.name for p in var.iterdir())
    assert {"planner.sqlite3", "secret_key", "fernet_key"} <= set(files)
    assert {name: mode(var / name) for name in files} == dict.fromkeys(files, 0o600)


def test_sqlite_gives_its_wal_and_shm_files_the_databases_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        database = private_file(private_dir(tmp_path / "var") / "planner.sqlite3")
        connection = sqlite3.connect(database)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("CREATE TABLE t (x)")
            connection.commit()
            wal, shm = Path(f"{database}-wal"), Path(f"{database}-shm")
            assert wal.exists() and shm.exists()
            assert (mode(database), mode(wal), mode(shm)) == (0o600, 0o600, 0o600)
        finally:
            connection.close()
    finally:
        os.umask(old)


def test_a_start_tightens_a_folder_and_files_made_loose_before(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    os.chmod(var, 0o755)
    for name in ("planner.sqlite3", "planner.sqlite3-wal", "planner.sqlite3-shm", "secret_key", "fernet_key",
                 "first-login.txt"):
        (var / name).write_text("")
        os.chmod(var / name, 0o644)
    (var / "staticfiles").mkdir(mode=0o755)
    os.chmod(var / "staticfiles", 0o755)

    result = manage("check", PLANNER_VAR_DIR=str(var))

    assert result.returncode == 0, result.stdout + result.stderr
    assert mode(var) == 0o700
    files = {p.name: mode(p) for p in var.iterdir() if p.is_file()}  # SQLite may drop an empty -wal
    assert {"planner.sqlite3", "secret_key", "fernet_key", "first-login.txt"} <= files.keys()
    assert files == dict.fromkeys(files, 0o600)
    assert mode(var / "staticfiles") == 0o755  # collected static files: for a web server to read
