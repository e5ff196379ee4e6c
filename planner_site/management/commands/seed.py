"""manage.py seed: roles, the offline demo model, prompt templates and the demo crew (idempotent).

``serve`` runs it with ``--if-changed``: then it does nothing when the same seed already ran on
the same database (a stamp in the var folder holds their fingerprint), so a second ``make run``
skips its queries. A fresh or newly migrated database always seeds (``serve`` asks so).
"""

from __future__ import annotations

import hashlib
import secrets
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from agents.engine import prompts
from agents.services import llm_ensure_demo, prompt_seed
from crews import demo
from crews.demo import demo_seed
from planner_site import accounts, roles
from planner_site.accounts import roles_ensure, user_bootstrap
from planner_site.roles import ADMIN

# What the seed writes comes from these modules: a change to any of them seeds again.
_SOURCES = (sys.modules[__name__], prompts, demo, accounts, roles, sys.modules[llm_ensure_demo.__module__])


def stamp_path() -> Path:
    return settings.VAR_DIR / "seeded"


def seed_fingerprint() -> str:
    """This code's seed on this database: its sources, and which database it is."""
    digest = hashlib.sha256(f"{connection.vendor} {connection.settings_dict['NAME']} "
                            f"{connection.settings_dict.get('HOST', '')}".encode())
    for module in _SOURCES:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def seed_is_current() -> bool:
    try:
        return stamp_path().read_text().strip() == seed_fingerprint()
    except OSError:
        return False


class Command(BaseCommand):
    help = "Load what a fresh install needs; safe to run on every start."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--if-changed", action="store_true",
            help="Do nothing when this seed already ran on this database (serve uses it).",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if not (opts["if_changed"] and seed_is_current()):
            self.seed()
            stamp_path().parent.mkdir(parents=True, exist_ok=True)
            stamp_path().write_text(seed_fingerprint() + "\n")
        login_file = settings.VAR_DIR / "first-login.txt"
        if login_file.exists():
            self.stdout.write(
                "Sign in with the account in " + str(login_file) + " (delete that file once you"
                " have changed the password), or create one with: python manage.py bootstrap"
                " --username you --password ... --admin"
            )
            self.stdout.write(login_file.read_text())

    def seed(self) -> None:
        roles_ensure()
        llm_ensure_demo()
        prompt_seed()
        User = get_user_model()
        login_file = settings.VAR_DIR / "first-login.txt"
        if not User.objects.exists():
            password = secrets.token_urlsafe(12)
            owner, _created = user_bootstrap(username="admin", password=password, role=ADMIN)
            login_file.parent.mkdir(parents=True, exist_ok=True)
            login_file.write_text(f"username: admin\npassword: {password}\n")
            login_file.chmod(0o600)
        owner = User.objects.filter(is_superuser=True).order_by("pk").first() or User.objects.order_by("pk").first()
        demo_seed(owner=owner)
        self.stdout.write("Loaded the demo data: the offline demo model, the prompt templates, the demo crew.")
