"""App config for the crews app."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CrewsConfig(AppConfig):
    name = "crews"
    verbose_name = _("Crews and runs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import crews.tasks  # noqa: F401 - the worker registers its entry points (crews.queue)
        from crews.plans import plans_sweep_stale
        from crews.runs import runs_sweep_stale
        from planner_site.worker import on_heartbeat

        # Every worker process marks runs and plan drafts whose worker died: at its start, then
        # on each beat.
        on_heartbeat(runs_sweep_stale)
        on_heartbeat(plans_sweep_stale)
