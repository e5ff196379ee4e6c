"""The people pages: list, invite, role, deactivate and reactivate (never oneself, never the last
active admin), daily budgets, and API tokens (own, and anyone's for admins)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from planner_site.models import ApiToken, AuditEvent, DailyBudget
from planner_site.roles import ADMIN, BUILDER, VIEWER, role_of
from planner_site.tokens import token_create
from tests.conftest import make_user, signed_in

ADMIN_PAGES = ("site:people-list", "site:person-invite", "site:audit-list")


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("action", flat=True))


def test_the_people_page_lists_name_role_access_last_sign_in_and_runs_this_month(
        admin_client_: Client, admin_user: Any, builder: Any, demo_crew: Any) -> None:
    from crews.models import Run

    Run.objects.create(crew=demo_crew, created_by=builder)
    Client().login(username="bob", password="pw-bob")  # sets last_login

    page = admin_client_.get(reverse("site:people-list"))

    assert page.status_code == 200
    html = page.content.decode()
    row = html[html.index(f'href="/people/{builder.pk}/"'):]
    row = row[:row.index("</tr>")]
    assert "bob" in row and "Builder" in row and "Active" in row and "Never" not in row
    assert '<td class="num" data-label="Runs this month">1</td>' in row


def test_an_admin_invites_a_builder_who_can_sign_in_with_the_first_password(
        admin_client_: Client, admin_user: Any) -> None:
    response = admin_client_.post(reverse("site:person-invite"), {
        "username": "carla", "email": "carla@example.com", "role": BUILDER, "password": "a long first pass 42",
    })

    carla = get_user_model().objects.get(username="carla")
    assert response.status_code == 302 and response["Location"] == reverse("site:person-detail", args=[carla.pk])
    assert role_of(carla) == BUILDER and not carla.is_staff and carla.email == "carla@example.com"
    assert Client().login(username="carla", password="a long first pass 42")
    event = AuditEvent.objects.get(action="user.invited")
    assert (event.actor, event.target_id, event.data) == (admin_user, str(carla.pk), {"username": "carla", "role": BUILDER})
    assert "a long first pass" not in str(AuditEvent.objects.values_list("data", flat=True))


def test_an_invite_with_a_taken_username_or_a_weak_password_says_why(admin_client_: Client, builder: Any) -> None:
    taken = admin_client_.post(reverse("site:person-invite"), {"username": "BOB", "role": BUILDER,
                                                               "password": "a long first pass 42"})
    weak = admin_client_.post(reverse("site:person-invite"), {"username": "dan", "role": BUILDER, "password": "123"})

    assert taken.status_code == 422 and "Someone already has this username." in taken.content.decode()
    assert weak.status_code == 422 and "too short" in weak.content.decode()
    assert not get_user_model().objects.filter(username="dan").exists()


def test_a_person_changes_their_password_with_djangos_view(builder_client: Client) -> None:
    page = builder_client.get(reverse("password_change"))
    assert page.status_code == 200 and 'name="new_password1"' in page.content.decode()

    done = builder_client.post(reverse("password_change"), {
        "old_password": "pw-bob", "new_password1": "tides and moons 77", "new_password2": "tides and moons 77"})

    assert done.status_code == 302
    assert Client().login(username="bob", password="tides and moons 77")


def test_an_admin_changes_a_role_and_the_change_is_audited(admin_client_: Client, builder: Any) -> None:
    response = admin_client_.post(reverse("site:person-role", args=[builder.pk]), {"role": ADMIN})

    assert response.status_code == 302
    builder.refresh_from_db()
    assert role_of(builder) == ADMIN and builder.is_staff
    event = AuditEvent.objects.get(action="user.role_changed")
    assert event.data == {"username": "bob", "before": BUILDER, "after": ADMIN}

    admin_client_.post(reverse("site:person-role", args=[builder.pk]), {"role": VIEWER})
    builder.refresh_from_db()
    assert role_of(builder) == VIEWER and not builder.is_superuser


def test_deactivating_someone_stops_their_sign_in_and_tokens_and_reactivating_restores_them(
        admin_client_: Client, builder: Any) -> None:
    _token, raw = token_create(user=builder)
    url = reverse("site:person-active", args=[builder.pk])

    assert admin_client_.post(url, {"active": "0"}).status_code == 302
    assert not Client().login(username="bob", password="pw-bob")
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/crews").status_code == 401

    assert admin_client_.post(url, {"active": "1"}).status_code == 302
    assert Client().login(username="bob", password="pw-bob")
    assert actions() == ["user.deactivated", "user.reactivated"]


def test_the_last_active_admin_cannot_step_down_and_the_page_says_why(admin_user: Any) -> None:
    other = make_user("otto", ADMIN)
    client = signed_in(other)
    client.post(reverse("site:person-active", args=[admin_user.pk]), {"active": "0"})  # two admins: fine
    admin_user.refresh_from_db()
    assert not admin_user.is_active

    back = signed_in(other).post(reverse("site:person-role", args=[other.pk]), {"role": BUILDER})
    assert back.status_code == 409
    assert "otto is the last active admin: make someone else an admin first." in back.content.decode()
    other.refresh_from_db()
    assert role_of(other) == ADMIN


def test_nobody_deactivates_themselves(admin_client_: Client, admin_user: Any) -> None:
    make_user("otto", ADMIN)

    response = admin_client_.post(reverse("site:person-active", args=[admin_user.pk]), {"active": "0"})

    assert response.status_code == 409 and "You cannot deactivate yourself." in response.content.decode()
    admin_user.refresh_from_db()
    assert admin_user.is_active


def test_deactivating_the_last_active_admin_is_refused(admin_user: Any) -> None:
    from planner_site.errors import Conflict
    from planner_site.people import person_set_active

    root = get_user_model().objects.create_user("root", is_superuser=True)  # an admin too (roles.role_of)
    person_set_active(actor=admin_user, user=root, active=False)
    with pytest.raises(Conflict) as refused:
        person_set_active(actor=root, user=admin_user, active=False)
    assert refused.value.code == "last_admin"


def test_an_admin_sets_a_persons_budget_and_the_site_default(admin_client_: Client, builder: Any) -> None:
    admin_client_.post(reverse("site:person-budget", args=[builder.pk]), {"cost_usd": "2.50"})
    admin_client_.post(reverse("site:site-budget"), {"site-cost_usd": "1"})

    assert DailyBudget.objects.get(user=builder).cost_usd == 2.5
    assert DailyBudget.objects.get(user__isnull=True).cost_usd == 1
    page = admin_client_.get(reverse("site:people-list")).content.decode()
    assert "$2.50" in page and "$1.00 (site default)" in page

    admin_client_.post(reverse("site:person-budget", args=[builder.pk]), {"cost_usd": ""})
    assert not DailyBudget.objects.filter(user=builder).exists()
    assert actions() == ["budget.set", "budget.set", "budget.cleared"]


def test_a_negative_budget_is_refused(admin_client_: Client, builder: Any) -> None:
    response = admin_client_.post(reverse("site:person-budget", args=[builder.pk]), {"cost_usd": "-1"})

    assert response.status_code == 422 and not DailyBudget.objects.exists()


@pytest.mark.parametrize("name", [*ADMIN_PAGES, "site:person-detail"])
def test_a_builder_gets_403_on_every_admin_page(builder_client: Client, builder: Any, name: str) -> None:
    url = reverse(name, args=[builder.pk]) if name == "site:person-detail" else reverse(name)
    assert builder_client.get(url).status_code == 403


@pytest.mark.parametrize("name", ["site:person-role", "site:person-active", "site:person-budget"])
def test_a_builder_gets_403_on_every_admin_action(builder_client: Client, other_builder: Any, name: str) -> None:
    response = builder_client.post(reverse(name, args=[other_builder.pk]),
                                   {"role": ADMIN, "active": "0", "cost_usd": "99"})
    assert response.status_code == 403
    assert builder_client.post(reverse("site:site-budget"), {"site-cost_usd": "9"}).status_code == 403
    assert builder_client.post(reverse("site:person-invite"), {"username": "x"}).status_code == 403
    assert not AuditEvent.objects.exists()


def test_the_nav_shows_the_admin_area_to_admins_and_usage_and_tokens_to_builders(
        admin_client_: Client, builder_client: Client) -> None:
    admin_nav = admin_client_.get(reverse("site:people-list")).content.decode()
    builder_nav = builder_client.get(reverse("crews:crew-list")).content.decode()

    assert 'href="/people/" aria-current="true">Admin<' in admin_nav
    for label in ("LLMs", "Prompts", "People", "Usage", "Audit log"):
        assert f">{label}</a>" in admin_nav
    assert ">Admin</a>" not in builder_nav and 'href="/usage/"' in builder_nav and 'href="/account/tokens/"' in builder_nav


# API tokens ------------------------------------------------------------------------------------


def test_a_person_creates_a_token_shown_once_with_a_copy_button(builder_client: Client, builder: Any) -> None:
    response = builder_client.post(reverse("site:token-list"), {"name": "nightly script"})

    html = response.content.decode()
    token = ApiToken.objects.get(user=builder)
    raw = html.split('id="new-token" type="text" value="')[1].split('"')[0]
    assert raw.startswith(token.prefix) and 'data-copy-target="new-token"' in html and "tokens.js" in html
    assert "no-store" in response["Cache-Control"]
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/crews").status_code == 200
    again = builder_client.get(reverse("site:token-list")).content.decode()
    assert raw not in again and "nightly script" in again and token.prefix in again
    event = AuditEvent.objects.get(action="token.created")
    assert raw not in str(event.data) and event.data["prefix"] == token.prefix


def test_a_revoked_token_gets_401(builder_client: Client, builder: Any) -> None:
    token, raw = token_create(user=builder, name="ci")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/crews").status_code == 200

    assert builder_client.post(reverse("site:token-revoke", args=[token.pk])).status_code == 302

    refused = api.get("/api/crews")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthenticated"
    assert actions() == ["token.revoked"]


def test_a_builder_cannot_revoke_someone_elses_token_but_an_admin_can(
        builder_client: Client, admin_client_: Client, other_builder: Any) -> None:
    token, _raw = token_create(user=other_builder, name="theirs")

    assert builder_client.post(reverse("site:token-revoke", args=[token.pk])).status_code == 404
    assert "theirs" not in builder_client.get(reverse("site:token-list")).content.decode()
    assert "theirs" in admin_client_.get(reverse("site:token-list")).content.decode()
    assert "theirs" in admin_client_.get(reverse("site:person-detail", args=[other_builder.pk])).content.decode()

    back = admin_client_.post(reverse("site:token-revoke", args=[token.pk]), {"next": "person"})
    assert back.status_code == 302 and back["Location"] == reverse("site:person-detail", args=[other_builder.pk])
    assert not ApiToken.objects.exists()
