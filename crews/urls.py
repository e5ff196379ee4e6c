"""Page routes of the crews app."""

from django.urls import path

from crews.views import crews as views
from crews.views import interop, plans, run_poll, runs

app_name = "crews"
urlpatterns = [
    path("crews/", views.crew_list, name="crew-list"),
    path("crews/new/", views.crew_create, name="crew-create"),
    path("crews/<int:crew_id>/", views.crew_detail, name="crew-detail"),
    path("crews/<int:crew_id>/edit/", views.crew_update, name="crew-update"),
    path("crews/<int:crew_id>/delete/", views.crew_delete, name="crew-delete"),
    path("crews/<int:crew_id>/tasks/new/", views.task_create, name="task-create"),
    path("tasks/<int:task_id>/edit/", views.task_update, name="task-update"),
    path("tasks/<int:task_id>/delete/", views.task_delete, name="task-delete"),
    path("tasks/<int:task_id>/move/", views.task_move, name="task-move"),
    # Plan, run and import pages declare their own routes next to their views.
    *plans.urlpatterns,
    *interop.urlpatterns,
    *runs.urlpatterns,
    *run_poll.urlpatterns,
]
