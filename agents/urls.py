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
    path("llms/", views.llm_list, name="llm-list"),
    path("llms/new/", views.llm_create, name="llm-create"),
    path("llms/<int:llm_id>/", views.llm_detail, name="llm-detail"),
    path("llms/<int:llm_id>/edit/", views.llm_update, name="llm-update"),
    path("llms/<int:llm_id>/test/", views.llm_test, name="llm-test"),
]
