"""Websocket routes of the crews app: the run page's HTML stream and the JSON API stream."""

from django.urls import path

from crews.consumers import RunEventsHtmlConsumer, RunEventsJsonConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunEventsHtmlConsumer.as_asgi()),
    path("ws/api/runs/<int:run_id>/", RunEventsJsonConsumer.as_asgi()),
]
