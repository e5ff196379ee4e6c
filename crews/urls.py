"""Page routes of the crews app."""

from django.urls import path  # noqa: F401

app_name = "crews"
urlpatterns: list = []
