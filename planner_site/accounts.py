"""Users and roles: the groups exist, and a user is created or updated idempotently."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from planner_site.roles import ADMIN, BUILDER, ROLES


def roles_ensure() -> None:
    for name in ROLES:
        Group.objects.get_or_create(name=name)


@transaction.atomic
def user_bootstrap(*, username: str, password: str, role: str = BUILDER) -> tuple[Any, bool]:
    """Create or update ``username`` with ``password`` and exactly one role; admins are staff."""
    roles_ensure()
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    user.set_password(password)
    user.is_active = True
    user.is_staff = role == ADMIN
    user.is_superuser = role == ADMIN
    user.save()
    user.groups.set([Group.objects.get(name=role)])
    return user, created
