"""App config for the site-wide concerns: API tokens, audit log, roles, bootstrap commands."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PlannerSiteConfig(AppConfig):
    name = "planner_site"
    verbose_name = _("Site")
    default_auto_field = "django.db.models.BigAutoField"
