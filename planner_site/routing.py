"""Websocket URL routes of every app."""

from crews.routing import websocket_urlpatterns as crews_ws

websocket_urlpatterns = [*crews_ws]
