"""App config for the knowledge app: sources agents and crews read, and what a crew remembers."""

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = _("Knowledge and memory")
    default_auto_field = "django.db.models.BigAutoField"

