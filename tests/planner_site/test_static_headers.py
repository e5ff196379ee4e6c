"""Static files, served by the embedded server itself, carry the headers pages get."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator

from planner_site.asgi import application


async def get(path: str) -> tuple[int, dict[bytes, bytes]]:
    """The status and headers of ``GET path`` on the real ASGI app (channels' HttpCommunicator
    trips on a file response's last, bodiless message)."""
    scope: dict[str, Any] = {"type": "http", "http_version": "1.1", "method": "GET", "path": path,
                             "raw_path": path.encode(), "query_string": b"", "headers": [(b"host", b"127.0.0.1")]}
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(timeout=10)
    while (await communicator.receive_output(timeout=10)).get("more_body"):
        pass
    await communicator.wait(timeout=10)
    return start["status"], {name.lower(): value for name, value in start["headers"]}


@pytest.mark.parametrize(("path", "content_type"), [
    ("/static/app.css", b"text/css"),
    ("/static/app.js", b"text/javascript"),
    ("/static/django_htmx/htmx-2.min.js", b"text/javascript"),
    ("/static/favicon.svg", b"image/svg+xml"),
])
async def test_a_static_file_says_nosniff(path, content_type):
    status, headers = await get(path)

    assert status == 200
    assert headers[b"content-type"].startswith(content_type)
    assert headers[b"x-content-type-options"] == b"nosniff"


async def test_a_missing_static_file_says_nosniff_too():
    status, headers = await get("/static/nope.js")

    assert status == 404
    assert headers[b"x-content-type-options"] == b"nosniff"
