"""Websocket routes of the crews app: the run page's HTML stream and the JSON API stream."""

websocket_urlpatterns: list = []
