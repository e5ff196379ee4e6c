"""Plan pages: the kickoff panel's draft, the visual plan editor, versions and their differences."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
