"""Page routes of the agents app."""

from django.urls import path

from agents import views, views_prompts

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
    path("prompts/", views_prompts.prompt_list, name="prompt-list"),
    path("prompts/<slug:key>/", views_prompts.prompt_update, name="prompt-update"),
    path("prompts/<slug:key>/reset/", views_prompts.prompt_reset, name="prompt-reset"),
    path("prompts/<slug:key>/versions/", views_prompts.prompt_versions, name="prompt-versions"),
    path("prompts/<slug:key>/versions/<int:number>/", views_prompts.prompt_version, name="prompt-version"),
    path("prompts/<slug:key>/versions/<int:number>/restore/", views_prompts.prompt_restore, name="prompt-restore"),
]
