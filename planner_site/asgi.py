"""ASGI entry point: HTTP (Django, static files) and websockets (channels)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "planner_site.settings")
django_asgi_app = get_asgi_application()  # first: it sets up Django before consumers import models

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from planner_site.routing import websocket_urlpatterns  # noqa: E402
from planner_site.ws_auth import WebsocketAuthMiddlewareStack  # noqa: E402

http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.PLANNER_SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            WebsocketAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
