"""Page routes of the agents app."""

from django.urls import path  # noqa: F401

app_name = "agents"
urlpatterns: list = []
