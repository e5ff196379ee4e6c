"""Django's ASGI handler with the middleware chain and the view run in one thread hop.

Under ASGI, Django runs each synchronous middleware's ``process_request`` and
``process_response`` in a ``sync_to_async`` hop of its own, and the view in another: about 20
hops from the event loop to the request thread and back for one request through this project's
middleware, which are all synchronous, as are its views. Here the whole chain runs as it would
under WSGI, in one hop. Async views still work (Django adapts them, as under WSGI); the request's
other steps (reading the body, the request_started signal, sending and closing the response) stay
Django's own.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class OneHopASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: Any) -> Any:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
