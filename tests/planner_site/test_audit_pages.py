"""The audit log page (admins, read-only): who, when, what and target, filtered by action, person
and days, paginated; and the changes this page exists for are written to it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.urls import reverse

from planner_site.audit import audit
from planner_site.models import AuditEvent
from planner_site.usage import site_today


def test_the_audit_log_shows_who_when_what_and_target(admin_client_: Client, admin_user: Any, builder: Any) -> None:
    admin_client_.post(reverse("site:person-invite"), {"username": "carla", "role": "viewer",
                                                       "password": "a long first pass 42"})

    page = admin_client_.get(reverse("site:audit-list")).content.decode()

    assert "Person invited" in page and 'title="user.invited"' in page
    assert "<td data-label=\"Who\">ada</td>" in page and "carla" in page and "user #" in page


def test_the_audit_log_filters_by_action_person_and_days(admin_client_: Client, admin_user: Any, builder: Any) -> None:
    audit(actor=builder, action="token.created", target=builder, prefix="cp_bob")
    audit(actor=admin_user, action="budget.set", target=builder, cost_usd="1")
    old = audit(actor=admin_user, action="user.invited", target=builder, username="old")
    AuditEvent.objects.filter(pk=old.pk).update(at=old.at - timedelta(days=40))
    url = reverse("site:audit-list")

    by_action = admin_client_.get(url, {"action": "token.created"}).content.decode()
    by_person = admin_client_.get(url, {"actor": admin_user.pk}).content.decode()
    by_days = admin_client_.get(url, {"first": (site_today() - timedelta(days=1)).isoformat()}).content.decode()

    assert "cp_bob" in by_action and "Daily budget set" not in by_action.split("<tbody>")[1]
    assert "cp_bob" not in by_person and "Daily budget set" in by_person.split("<tbody>")[1]
    assert "old" not in by_days.split("<tbody>")[1] and "cp_bob" in by_days
    assert admin_client_.get(url, {"actor": "x", "first": "never"}).status_code == 200


def test_the_audit_log_is_paginated_and_keeps_its_filters(admin_client_: Client, admin_user: Any) -> None:
    for n in range(55):
        audit(actor=admin_user, action="budget.set", target=admin_user, cost_usd=str(n))

    first = admin_client_.get(reverse("site:audit-list"), {"action": "budget.set"}).content.decode()
    second = admin_client_.get(reverse("site:audit-list"), {"action": "budget.set", "page": 2}).content.decode()

    assert "Page 1 of 2" in first and 'href="?page=2&amp;action=budget.set"' in first
    assert second.count('<tr>') == 6  # the head and five events


def test_the_audit_log_is_read_only(admin_client_: Client) -> None:
    assert admin_client_.post(reverse("site:audit-list")).status_code == 405


def test_a_stopped_run_and_a_started_one_are_audited(builder: Any, demo_crew: Any) -> None:
    from crews import runs

    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
    runs.run_cancel(actor=builder, run=run)

    assert list(AuditEvent.objects.order_by("id").values_list("action", "actor__username")) == [
        ("run.started", "bob"), ("run.stopped", "bob")]
