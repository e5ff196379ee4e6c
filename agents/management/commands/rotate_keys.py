"""manage.py rotate_keys: re-encrypt every stored LLM key with the newest PLANNER_SECRETS_KEYS key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents import crypto
from agents.models import LLM


class Command(BaseCommand):
    help = "Re-encrypt stored secrets with the first key of PLANNER_SECRETS_KEYS (after adding one)."

    def handle(self, *args: Any, **opts: Any) -> None:
        count = 0
        with transaction.atomic():
            for llm in LLM.objects.select_for_update().exclude(api_key_encrypted=""):
                try:
                    llm.api_key_encrypted = crypto.rotate(llm.api_key_encrypted)
                except crypto.SecretUnreadable:
                    raise CommandError(
                        f"The key of LLM {llm.name!r} cannot be read with any configured key; nothing was changed."
                    ) from None
                llm.save(update_fields=["api_key_encrypted"])
                count += 1
        self.stdout.write(self.style.SUCCESS(f"Re-encrypted {count} key(s)."))
