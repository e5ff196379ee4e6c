"""Page routes of the knowledge app."""

from django.urls import path

from knowledge import views

app_name = "knowledge"
urlpatterns = [
    path("agents/<int:owner_id>/knowledge/", views.source_list, {"kind": "agent"}, name="source-list-agent"),
    path("crews/<int:owner_id>/knowledge/", views.source_list, {"kind": "crew"}, name="source-list-crew"),
    path("knowledge/<int:source_id>/delete/", views.source_delete, name="source-delete"),
    path("crews/<int:crew_id>/memories/", views.memory_list, name="memory-list"),
    path("crews/<int:crew_id>/memories/clear/", views.memories_clear, name="memory-clear"),
    path("memories/<int:memory_id>/", views.memory_update, name="memory-update"),
    path("memories/<int:memory_id>/delete/", views.memory_delete, name="memory-delete"),
]
