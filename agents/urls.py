"""Page routes of the agents app."""

from django.urls import path

from agents import views

app_name = "agents"
urlpatterns = [
    path("agents/", views.agent_list, name="agent-list"),
    path("agents/new/", views.agent_create, name="agent-create"),
    path("agents/<int:agent_id>/", views.agent_detail, name="agent-detail"),
    path("agents/<int:agent_id>/edit/", views.agent_update, name="agent-update"),
    path("agents/<int:agent_id>/delete/", views.agent_delete, name="agent-delete"),
]
