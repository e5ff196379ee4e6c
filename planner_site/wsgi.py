"""WSGI entry point, for management tooling only: the product is served over ASGI by Daphne."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner_site.settings")
application = get_wsgi_application()
