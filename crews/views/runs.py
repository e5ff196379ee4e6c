"""Run pages: the live run view, replays of finished runs, and run history."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
