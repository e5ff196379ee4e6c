"""Scale-out: several processes of a new release start together on one new PostgreSQL database;
``serve``'s preparation (migrate, seed) runs one process at a time, so none of them crashes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from django.db import connection

from tests.scaleout.test_run_across_processes import _database_url

ROOT = Path(__file__).resolve().parents[2]
PREPARE = "from planner_site.management.commands.serve import Command; Command().prepare()"


def test_three_processes_preparing_one_new_database_at_once_all_succeed(django_db_blocker) -> None:
    name = f"prepare_{uuid.uuid4().hex[:10]}"
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _database_url().rsplit("/", 1)[0] + "/" + name
        procs = []
        with tempfile.TemporaryDirectory() as var:
            for index in range(3):
                env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PLANNER_"))}
                env.update(DJANGO_SETTINGS_MODULE="planner_site.settings", DATABASE_URL=url,
                           PLANNER_VAR_DIR=f"{var}/{index}", PLANNER_LOG_LEVEL="WARNING")
                procs.append(subprocess.Popen(
                    [sys.executable, "manage.py", "shell", "-c", PREPARE], cwd=ROOT, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                ))
            outputs = [(proc.wait(timeout=300), proc.communicate()[0]) for proc in procs]
        assert [code for code, _ in outputs] == [0, 0, 0], "\n".join(out for _, out in outputs)
        assert sum("database migrations" in out for _, out in outputs) == 1  # the others found none pending
        logins = [out for _, out in outputs if "username: admin" in out]
        assert len(logins) == 1  # one admin made, by the first process only (each has its own var dir)
    finally:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
