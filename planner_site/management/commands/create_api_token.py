"""manage.py create_api_token USERNAME: print a new API token once (only its hash is kept)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from planner_site.audit import audit
from planner_site.tokens import token_create


class Command(BaseCommand):
    help = "Create an API token for a user and print it once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="command line")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"No user named {opts['username']!r}.")
        token, raw = token_create(user=user, name=opts["name"])
        audit(actor=None, action="token.created", target=token, prefix=token.prefix, name=token.name,
              owner=user.get_username(), via="create_api_token")
        self.stdout.write(raw)
