"""App config for the crews app."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CrewsConfig(AppConfig):
    name = "crews"
    verbose_name = _("Crews and runs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        import crews.tasks  # noqa: F401 - the worker registers its entry points (crews.queue)
        from agents.models import Agent
        from crews.models import Crew
        from crews.plans import plans_sweep_stale
        from crews.runs import run_guard_delete, runs_sweep_stale
        from planner_site.worker import on_heartbeat

        # A crew or an agent whose run works is not deleted (a 409 naming the run).
        pre_delete.connect(run_guard_delete, sender=Crew, dispatch_uid="crews.run_guard_delete.crew")
        pre_delete.connect(run_guard_delete, sender=Agent, dispatch_uid="crews.run_guard_delete.agent")

        # Every worker process marks runs and plan drafts whose worker died: at its start, then
        # on each beat.
        on_heartbeat(runs_sweep_stale)
        on_heartbeat(plans_sweep_stale)
