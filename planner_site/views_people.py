"""People pages (admins): the list, invite, a person's role, access, daily budget and tokens;
and everyone's own API tokens page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents.views import HtmxHttpRequest, domain_errors, redirect_after_post
from planner_site import people, selectors
from planner_site.budgets import budget_of
from planner_site.errors import Conflict
from planner_site.forms import BudgetForm, InviteForm, RoleForm, TokenForm
from planner_site.roles import is_admin
from planner_site.templatetags.money import usd


def require_admin(request: HttpRequest) -> None:
    if not is_admin(request.user):
        raise PermissionDenied(_("Only an admin can manage people, usage and the audit log."))


def _site_budget_form(data: Any = None) -> BudgetForm:
    return BudgetForm(data, prefix="site", initial={"cost_usd": selectors.site_budget()},
                      help_text=_("For everyone without a budget of their own. Empty: no daily limit."))


def _budget_saved(request: HttpRequest, form: BudgetForm, *, user: Any) -> bool:
    """Save a valid budget form as ``user``'s daily budget (``None``: the site default) and say so;
    False, with the errors on the form, when it is not valid or the service refuses it."""
    if not form.is_valid():
        return False
    amount = form.cleaned_data["cost_usd"]
    try:
        people.budget_set(actor=request.user, user=user, amount=amount)
    except ValidationError as exc:
        form.add_service_errors(exc)
        return False
    if user is None:
        said = (_("Site default budget: %(amount)s a day.") % {"amount": usd(amount)} if amount is not None
                else _("No site default budget: no daily limit by default."))
    else:
        name = user.get_username()
        said = (_("%(name)s's daily budget: %(amount)s.") % {"name": name, "amount": usd(amount)}
                if amount is not None else _("%(name)s follows the site default budget.") % {"name": name})
    messages.success(request, said)
    return True


@require_GET
@domain_errors
def people_list(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    return render(request, "site/people_list.html", {
        "people": selectors.people_list(), "site_budget": selectors.site_budget(),
        "site_budget_form": _site_budget_form(),
    })


@require_POST
@domain_errors
def site_budget(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    form = _site_budget_form(request.POST)
    if _budget_saved(request, form, user=None):
        return redirect_after_post(request, reverse("site:people-list"))
    return render(request, "site/people_list.html", {
        "people": selectors.people_list(), "site_budget": selectors.site_budget(), "site_budget_form": form,
    }, status=422)


@require_http_methods(["GET", "POST"])
@domain_errors
def person_invite(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    form = InviteForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            user = people.person_invite(actor=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("%(name)s can now sign in with the password you set.")
                             % {"name": user.get_username()})
            return redirect_after_post(request, reverse("site:person-detail", args=[user.pk]))
    status = 422 if form.is_bound else 200
    return render(request, "site/person_form.html", {"form": form}, status=status)


def _detail_context(request: HttpRequest, user: Any, **forms: Any) -> dict[str, Any]:
    own, default = budget_of(user)
    help_text = (_("Empty: the site default, %(amount)s a day.") % {"amount": usd(default)} if default is not None
                 else _("Empty: no daily limit (no site default is set)."))
    role = selectors.person_role(user)
    return {
        "person": user,
        "role": role,
        "own_budget": own,
        "site_budget": default,
        "is_self": user.pk == request.user.pk,
        "role_form": forms.get("role_form") or RoleForm(initial={"role": role}),
        "budget_form": forms.get("budget_form") or BudgetForm(initial={"cost_usd": own}, help_text=help_text),
        "tokens": selectors.tokens_of(user=user),
        "error": forms.get("error", ""),
    }


@require_GET
@domain_errors
def person_detail(request: HtmxHttpRequest, user_id: int) -> HttpResponse:
    require_admin(request)
    user = selectors.person_get(user_id=user_id)
    return render(request, "site/person_detail.html", _detail_context(request, user))


@require_POST
@domain_errors
def person_role(request: HtmxHttpRequest, user_id: int) -> HttpResponse:
    require_admin(request)
    user = selectors.person_get(user_id=user_id)
    form = RoleForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            people.person_set_role(actor=request.user, user=user, role=form.cleaned_data["role"])
        except Conflict as exc:
            error = exc.detail
        else:
            messages.success(request, _("%(name)s's role is saved.") % {"name": user.get_username()})
            return redirect_after_post(request, reverse("site:person-detail", args=[user.pk]))
    context = _detail_context(request, selectors.person_get(user_id=user_id), role_form=form, error=error)
    return render(request, "site/person_detail.html", context, status=409 if error else 422)


@require_POST
@domain_errors
def person_active(request: HtmxHttpRequest, user_id: int) -> HttpResponse:
    """Deactivate or reactivate (``active=0|1``)."""
    require_admin(request)
    user = selectors.person_get(user_id=user_id)
    active = request.POST.get("active") == "1"
    try:
        people.person_set_active(actor=request.user, user=user, active=active)
    except Conflict as exc:
        context = _detail_context(request, user, error=exc.detail)
        return render(request, "site/person_detail.html", context, status=409)
    if active:
        messages.success(request, _("%(name)s can sign in again.") % {"name": user.get_username()})
    else:
        messages.success(request, _("%(name)s is deactivated: they cannot sign in or use their API tokens.")
                         % {"name": user.get_username()})
    return redirect_after_post(request, reverse("site:person-detail", args=[user.pk]))


@require_POST
@domain_errors
def person_budget(request: HtmxHttpRequest, user_id: int) -> HttpResponse:
    require_admin(request)
    user = selectors.person_get(user_id=user_id)
    form = BudgetForm(request.POST)
    if _budget_saved(request, form, user=user):
        return redirect_after_post(request, reverse("site:person-detail", args=[user.pk]))
    context = _detail_context(request, user, budget_form=form)
    return render(request, "site/person_detail.html", context, status=422)


# API tokens (everyone's own; admins also anyone's) -------------------------------------------


def _tokens_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    admin = is_admin(request.user)
    return {
        "tokens": selectors.tokens_of(user=request.user),
        "everyone_tokens": selectors.tokens_all().exclude(user=request.user) if admin else None,
        "form": extra.pop("form", None) or TokenForm(),
        **extra,
    }


@never_cache  # the page that shows a new token once must not be kept by a browser or proxy
@require_http_methods(["GET", "POST"])
@domain_errors
def token_list(request: HtmxHttpRequest) -> HttpResponse:
    form = TokenForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        token, raw = people.token_create_for(actor=request.user, name=form.cleaned_data["name"])
        # Rendered, not redirected: the value is shown this once and stored nowhere.
        return render(request, "site/token_list.html", _tokens_context(request, created=token, raw=raw))
    return render(request, "site/token_list.html", _tokens_context(request, form=form),
                  status=422 if form.is_bound else 200)


@require_POST
@domain_errors
def token_revoke(request: HtmxHttpRequest, token_id: int) -> HttpResponse:
    token = people.token_get(actor=request.user, token_id=token_id)
    people.token_revoke(actor=request.user, token=token)
    messages.success(request, _("Token %(prefix)s… is revoked.") % {"prefix": token.prefix})
    back = request.POST.get("next", "")
    if back == "person" and is_admin(request.user):
        return redirect(reverse("site:person-detail", args=[token.user_id]))
    return redirect_after_post(request, reverse("site:token-list"))
