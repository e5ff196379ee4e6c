"""People services: invite, change a role, deactivate or reactivate, daily budgets, API tokens.

Every change is audited (``planner_site.audit``), never with a password or a token's value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils.translation import gettext as _

from planner_site.accounts import roles_ensure
from planner_site.audit import audit
from planner_site.errors import Conflict, Forbidden, NotFound
from planner_site.models import ApiToken, DailyBudget
from planner_site.roles import ADMIN, ROLES, is_admin, role_of
from planner_site.tokens import token_create

MAX_BUDGET_USD = Decimal("99999999.99")


def _require_admin(actor: Any) -> None:
    if not is_admin(actor):
        raise Forbidden(_("Only an admin can manage people."))


def active_admins() -> Any:
    """The active users with the admin role (a superuser counts as one, as ``roles.role_of`` says)."""
    return (
        get_user_model().objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=ADMIN)).distinct()
    )


def _refuse_losing_last_admin(user: Any) -> None:
    if role_of(user) == ADMIN and user.is_active and not active_admins().exclude(pk=user.pk).exists():
        raise Conflict(_("%(name)s is the last active admin: make someone else an admin first.")
                       % {"name": user.get_username()}, code="last_admin")


def _apply_role(user: Any, role: str) -> None:
    """Exactly one role; admins are staff and superusers, as ``accounts.user_bootstrap`` makes them."""
    roles_ensure()
    user.is_staff = user.is_superuser = role == ADMIN
    user.save(update_fields=["is_staff", "is_superuser"])
    user.groups.set([Group.objects.get(name=role)])


@transaction.atomic
def person_invite(*, actor: Any, username: str, email: str = "", role: str, password: str) -> Any:
    """An admin adds a person with a role and a first password (they can change it later)."""
    _require_admin(actor)
    User = get_user_model()
    username = username.strip()
    if role not in ROLES:
        raise ValidationError({"role": _("Choose admin, builder or viewer.")})
    if not username:
        raise ValidationError({"username": _("Enter a username.")})
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": _("Someone already has this username.")})
    user = User(username=username, email=email.strip())
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise ValidationError({"password": exc.messages}) from None
    user.set_password(password)
    user.save()
    _apply_role(user, role)
    audit(actor=actor, action="user.invited", target=user, username=user.username, role=role)
    return user


@transaction.atomic
def person_set_role(*, actor: Any, user: Any, role: str) -> Any:
    """Change a person's role; the last active admin keeps theirs."""
    _require_admin(actor)
    if role not in ROLES:
        raise ValidationError({"role": _("Choose admin, builder or viewer.")})
    before = role_of(user)
    if before == role:
        return user
    if before == ADMIN:
        _refuse_losing_last_admin(user)
    _apply_role(user, role)
    audit(actor=actor, action="user.role_changed", target=user, username=user.username, before=before, after=role)
    return user


@transaction.atomic
def person_set_active(*, actor: Any, user: Any, active: bool) -> Any:
    """Deactivate (they can no longer sign in or use their tokens) or reactivate a person; never
    oneself, and never the last active admin."""
    _require_admin(actor)
    if user.is_active == active:
        return user
    if not active:
        if user.pk == actor.pk:
            raise Conflict(_("You cannot deactivate yourself."), code="self")
        _refuse_losing_last_admin(user)
    user.is_active = active
    user.save(update_fields=["is_active"])
    audit(actor=actor, action="user.reactivated" if active else "user.deactivated", target=user,
          username=user.username)
    return user


def _check_amount(amount: Decimal | None) -> None:
    if amount is not None and not Decimal(0) <= amount <= MAX_BUDGET_USD:
        raise ValidationError({"cost_usd": _("Enter an amount from 0 to %(max)s.") % {"max": MAX_BUDGET_USD}})


@transaction.atomic
def budget_set(*, actor: Any, user: Any | None, amount: Decimal | None) -> DailyBudget | None:
    """Set (or, with None, remove) ``user``'s daily cost budget in USD; ``user=None`` is the site
    default for everyone without their own. A person without either has no daily limit."""
    _require_admin(actor)
    _check_amount(amount)
    rows = DailyBudget.objects.filter(user__isnull=True) if user is None else DailyBudget.objects.filter(user=user)
    target: Any = user if user is not None else DailyBudget(pk=0)
    extra = {"username": user.username} if user is not None else {"site_default": True}
    if amount is None:
        if rows.delete()[0]:
            audit(actor=actor, action="budget.cleared", target=target, **extra)
        return None
    budget, _created = rows.update_or_create(defaults={"cost_usd": amount}, user=user)
    audit(actor=actor, action="budget.set", target=target, cost_usd=str(amount), **extra)
    return budget


@transaction.atomic
def token_create_for(*, actor: Any, name: str) -> tuple[ApiToken, str]:
    """A person creates an API token for themselves; the value is returned here only."""
    token, raw = token_create(user=actor, name=name.strip()[:100])
    audit(actor=actor, action="token.created", target=token, prefix=token.prefix, name=token.name,
          owner=actor.get_username())
    return token, raw


def token_get(*, actor: Any, token_id: int) -> ApiToken:
    """One's own token; an admin may have anyone's. Anyone else's is missing (404)."""
    tokens = ApiToken.objects.select_related("user")
    if not is_admin(actor):
        tokens = tokens.filter(user=actor)
    token = tokens.filter(pk=token_id).first()
    if token is None:
        raise NotFound(_("No such API token."))
    return token


@transaction.atomic
def token_revoke(*, actor: Any, token: ApiToken) -> None:
    """Revoke a token: requests with it are refused (401) from now on."""
    if token.user_id != actor.pk:
        _require_admin(actor)
    audit(actor=actor, action="token.revoked", target=token, prefix=token.prefix, name=token.name,
          owner=token.user.get_username())
    token.delete()
