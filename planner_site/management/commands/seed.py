"""manage.py seed: roles, the offline demo model, prompt templates and the demo crew (idempotent).

``serve`` runs it on every start, after pending migrations and under the same lock
(``planner_site.prepare``): it costs a few queries (about 0.3 s) and keeps a database that was
dropped, flushed or given new prompt keys whole, which a stamp outside the database could not.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from agents.services import llm_ensure_demo, prompt_seed
from crews.demo import demo_seed
from planner_site.accounts import roles_ensure, user_bootstrap
from planner_site.roles import ADMIN


class Command(BaseCommand):
    help = "Load what a fresh install needs; safe to run on every start."

    def handle(self, *args: Any, **opts: Any) -> None:
        self.seed()
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
