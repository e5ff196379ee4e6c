"""Django's ASGI handler, with a request's synchronous work in one hop to a long-lived thread.

Under ASGI, Django runs each synchronous middleware's ``process_request`` and
``process_response`` in a ``sync_to_async`` hop of its own, and the view in another: about 20
hops from the event loop to the request thread and back for one request through this project's
middleware, which are all synchronous, as are its views. Here the whole chain runs as it would
under WSGI, in one hop. Async views still work (Django adapts them, as under WSGI); the request's
other steps (reading the body, the request_started signal, sending and closing the response) stay
Django's own.

Django also gives every request a thread of its own, started for it and dropped after it. A
dropped thread cannot keep a database connection, so Django's docs say to turn persistent
connections off under ASGI, and each request paid for a new one (~0.7 ms of CPU on SQLite, a
round of authentication on PostgreSQL). Here a request borrows one of a few long-lived threads
instead (``RequestThreads``), and its connection lives on in that thread for the next request,
within ``CONN_MAX_AGE`` as under WSGI.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

# As many threads as requests usually in flight at once; more borrow a thread of their own.
KEPT_THREADS = 32


class RequestThreads:
    """Single-thread executors lent to one request at a time and kept for the next.

    An executor comes back only once its thread is idle: a view whose client went away runs on
    (threads cannot be stopped), and the next request must not wait behind it. A request beyond
    ``keep`` at once gets a thread of its own, which closes its database connections and ends
    when the request is over, so no connection outlives its thread.
    """

    def __init__(self, keep: int = KEPT_THREADS) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []
        self._lent = 0  # borrowed and not back yet
        self._lock = threading.Lock()  # one event loop uses it, but tests may run several
        self._numbers = itertools.count(1)

    def borrow(self) -> ThreadPoolExecutor:
        with self._lock:
            self._lent += 1
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"request-{next(self._numbers)}")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        # Queued after whatever the request left running, so it runs once the thread is idle.
        executor.submit(self._returned, executor)

    def _returned(self, executor: ThreadPoolExecutor) -> None:
        """In the executor's own thread, idle now: keep it, or close its connections and end."""
        with self._lock:
            self._lent -= 1
            if len(self._idle) < self.keep:
                self._idle.append(executor)
                return
        connections.close_all()
        executor.shutdown(wait=False)  # the thread ends after this call

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def lent(self) -> int:
        """Executors borrowed and not back yet (a request running, or its thread still busy)."""
        return self._lent

    def close(self) -> None:
        """End the idle threads, each closing its database connections first."""
        with self._lock:
            idle, self._idle = self._idle, []
        for executor in idle:
            executor.submit(connections.close_all)
            executor.shutdown(wait=True)


class OneHopASGIHandler(ASGIHandler):
    def __init__(self, *, threads: RequestThreads | None = None) -> None:
        super().__init__()
        self.threads = threads or RequestThreads()

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Django's own __call__ opens a ThreadSensitiveContext without an executor; inside this
        # one it defers to ours, so every thread-sensitive step of the request runs here.
        executor = self.threads.borrow()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await super().__call__(scope, receive, send)
        finally:
            self.threads.give_back(executor)

    async def get_response_async(self, request: Any) -> Any:
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


class StaticFilesHandler(ASGIStaticFilesHandler):
    """Django's ASGI static files handler (the embedded server's), with the headers that
    ``SecurityMiddleware`` gives pages: static files skip the middleware chain.

    ``nosniff`` makes a browser take a file for what its Content-Type says, never guess a
    script or a page out of it.
    """

    async def get_response_async(self, request: Any) -> Any:
        response = await super().get_response_async(request)
        if settings.SECURE_CONTENT_TYPE_NOSNIFF:
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response
