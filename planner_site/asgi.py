"""ASGI entry point: HTTP (Django, static files) and websockets (channels)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner_site.settings")
django.setup(set_prefix=False)  # first, as get_asgi_application() would: consumers import models

from planner_site.http import OneHopASGIHandler, StaticFilesHandler  # noqa: E402

# Django's ASGI handler, with the middleware chain and view in one thread hop (planner_site.http).
django_asgi_app = OneHopASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from planner_site.routing import websocket_urlpatterns  # noqa: E402
from planner_site.ws_auth import SameOriginValidator, WebsocketAuthMiddlewareStack  # noqa: E402

http_app = StaticFilesHandler(django_asgi_app) if settings.PLANNER_SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        # Another site's page cannot open a socket: same scheme, host and port (planner_site.ws_auth).
        "websocket": SameOriginValidator(
            WebsocketAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
