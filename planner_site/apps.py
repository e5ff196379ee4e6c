"""App config for the site-wide concerns: API tokens, audit log, roles, bootstrap commands."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PlannerSiteConfig(AppConfig):
    name = "planner_site"
    verbose_name = _("Site")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Enqueuing a task on PostgreSQL notifies db_worker processes (planner_site.notify).
        from planner_site import notify  # noqa: F401
