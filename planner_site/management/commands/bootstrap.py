"""manage.py bootstrap --username U --password P [--admin|--role R]: create or update a user."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from planner_site.accounts import user_bootstrap
from planner_site.roles import ADMIN, ROLES


class Command(BaseCommand):
    help = "Create or update a user (idempotent). --admin makes an administrator."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--password", required=True)
        parser.add_argument("--admin", action="store_true", help="Give the admin role.")
        parser.add_argument("--role", choices=ROLES, default=None, help="admin, builder or viewer.")
        parser.add_argument(
            "--allow-weak-password", action="store_true", help="Skip the password strength checks."
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        role = ADMIN if opts["admin"] else (opts["role"] or "builder")
        if not opts["allow_weak_password"]:
            try:
                validate_password(opts["password"])
            except ValidationError as exc:
                raise CommandError("; ".join(exc.messages)) from None
        user, created = user_bootstrap(username=opts["username"], password=opts["password"], role=role)
        verb = "Created" if created else "Updated"
        self.stdout.write(self.style.SUCCESS(f"{verb} {role} {user.username}."))
